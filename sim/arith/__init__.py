"""moagcn.sim.arith.stream."""

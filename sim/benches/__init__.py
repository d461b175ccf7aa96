"""moagcn.sim.benches."""

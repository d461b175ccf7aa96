"""moagcn.sim.sspmm."""

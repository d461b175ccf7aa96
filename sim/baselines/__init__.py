"""moagcn.sim.baselines.accelerators."""

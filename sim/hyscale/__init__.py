"""moagcn.sim.hyscale."""

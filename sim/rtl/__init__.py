"""moagcn.sim.rtl."""

"""moagcn.host.mixgcn."""

"""moagcn.host.vgnn."""

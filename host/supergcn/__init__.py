"""moagcn.host.supergcn."""

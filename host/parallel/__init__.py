"""moagcn.host.parallel."""

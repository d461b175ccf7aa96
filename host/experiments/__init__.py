"""moagcn.host.experiments."""

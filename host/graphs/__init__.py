"""moagcn.host.graphs."""

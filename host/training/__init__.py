"""moagcn.host.training."""

"""moagcn.host.nn.layers."""

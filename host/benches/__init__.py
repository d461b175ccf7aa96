"""moagcn.host.benches."""

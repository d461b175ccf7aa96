"""moagcn.host.hyscale."""

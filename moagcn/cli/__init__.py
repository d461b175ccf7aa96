"""moagcn.cli.main."""

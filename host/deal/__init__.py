"""moagcn.host.deal.engine."""

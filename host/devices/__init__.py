"""moagcn.host.devices.select."""

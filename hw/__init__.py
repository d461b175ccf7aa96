"""Amaranth gateware of moagcn (``import moagcn.hw``)."""

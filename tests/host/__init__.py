"""Tests of the host runtime (moagcn.host)."""

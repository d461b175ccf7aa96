"""The SDDMM accelerator: ``S[e, h] = Σ_f Q[v, hD + f] K[u, hD + f]`` for every stored entry
``e = (v, u)`` of a CSR pattern and every head ``h`` (docs/attention.md).

The configuration (:mod:`.config`) and the host-visible protocol (:mod:`.protocol`) are plain
Python; the gateware (:mod:`.top`) is imported on first use.
"""

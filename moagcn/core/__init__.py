"""The types every layer of moagcn shares, below ``hw``, ``sim`` and ``host``.

- :mod:`.graph`: :class:`~.graph.CSRGraph` and CSR validation;
- :mod:`.counters`: :class:`~.counters.Counters`, the one record of what an accelerator did;
- :mod:`.tiling`: cutting a sparse job into tiles that fit an accelerator's buffers;
- :mod:`.spec`: :class:`~.spec.AcceleratorSpec`, what a design tells the rest of the toolkit,
  and the registry of specs;
- :mod:`.device`: :class:`~.device.SparseDevice`, the interface the host runtime computes
  aggregations through, and the torch ``cpu`` device.

Nothing here imports ``moagcn.hw``, ``moagcn.sim`` or ``moagcn.host`` at import time.
"""

"""moagcn: design, verify and co-simulate sparse GNN accelerators.

Sub-packages (one import namespace, mapped onto the top-level folders):

- :mod:`moagcn.hw`    Amaranth gateware (``hw/``)
- :mod:`moagcn.sim`   golden models, simulation backends, build cache (``sim/``)
- :mod:`moagcn.host`  graphs, devices and the training runtime (``host/``)
- :mod:`moagcn.synth` yosys / nextpnr flows (``synth/``)
"""

__version__ = "0.1.0"

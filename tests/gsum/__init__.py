"""A test-only design that follows docs/architecture.md's "adding a design" literally.

Importing this package registers it as ``gsum`` (the one line an in-tree design adds to
:mod:`moagcn.core.registry`): ``config.py``, ``protocol.py`` and ``top.py`` are what ``hw/gsum/``
would hold, ``golden.py`` and ``spec.py`` what ``sim/gsum/`` would hold.
"""

from moagcn.core.registry import Design, register

DESIGN = register(Design(
    "gsum", "gather-sum unit: Y = A X, one edge at a time (test-only worked example)",
    config="tests.gsum.config:GSumConfig", presets="tests.gsum.config:PRESETS",
    gateware="tests.gsum.top:GSumTop", spec="tests.gsum.spec:SPEC"), replace=True)

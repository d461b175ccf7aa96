"""Conversions between moagcn graphs and datasets and PyTorch Geometric objects.

See :mod:`moagcn.host.graphs.pyg` for the direction convention (a CSR row is a target, its column ids
the sources of its incoming edges). torch-geometric is optional (``pip install moagcn[pyg]``);
only :func:`to_pyg` needs it.
"""

from moagcn.host.graphs.pyg import (check_edge_index, from_edge_index, from_pyg, graph_from_pyg,
                             require_pyg, to_edge_index, to_pyg, weights_to_csr)

__all__ = ["from_pyg", "to_pyg", "from_edge_index", "to_edge_index", "graph_from_pyg",
           "weights_to_csr", "check_edge_index", "require_pyg"]

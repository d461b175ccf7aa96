"""PyTorch Geometric-style graph convolutions whose aggregation runs on a moagcn sparse device.

``from moagcn.nn import GCNConv, SAGEConv, GINConv, GATConv``; see :mod:`moagcn.host.nn.layers` (and :mod:`moagcn.host.nn.gat`) for the
conventions, the supported options and an example, and docs/pyg.md for a whole model.
"""

from moagcn.host.nn.gat import GATConv
from moagcn.host.nn.layers import GCNConv, GINConv, SAGEConv, make_sparse_device

__all__ = ["GCNConv", "SAGEConv", "GINConv", "GATConv", "make_sparse_device"]

"""Results remembered per read-only array.

Training aggregates one adjacency every step, so what is computed from a graph's CSR arrays
(tile plans, sorted rows, long-row pieces) is worth keeping between calls. A read-only array
(:func:`~moagcn.core.graph.validate_csr` returns its arrays so, and so does everything a
:class:`ArrayMemo` hands out) cannot change under the result; a writeable one could, so its
results are computed afresh every time.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable

import numpy as np


def read_only(*arrays) -> bool:
    """Whether every one of ``arrays`` is a numpy array that cannot be written."""
    return all(isinstance(a, np.ndarray) and not a.flags.writeable for a in arrays)


class ArrayMemo:
    """The ``kept`` most recent results, keyed by the identity of read-only arrays and other
    (hashable) parameters. An entry holds its arrays, so their ids are not reused while it
    is kept."""

    def __init__(self, kept: int = 8):
        self.kept = kept
        self._entries: OrderedDict = OrderedDict()

    def get(self, arrays: tuple, params: tuple, compute: Callable[[], object]):
        """``compute()``, remembered when every array of ``arrays`` is read-only."""
        if not read_only(*arrays):
            return compute()
        key = (*(id(a) for a in arrays), *params)
        if key in self._entries:
            self._entries.move_to_end(key)
            return self._entries[key][1]
        value = compute()
        self._entries[key] = (arrays, value)
        while len(self._entries) > self.kept:
            self._entries.popitem(last=False)
        return value

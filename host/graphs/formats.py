"""Graph and dataset files: .npz, Matrix Market, edge lists and PyG-saved .pt, chosen by suffix.

One reader, :func:`read`, returns a :class:`GraphFile`: the graph (a
:class:`~moagcn.core.graph.CSRGraph`), its float32 edge weights when the file has any, and the
full :class:`~moagcn.host.graphs.data.Dataset` when the file holds features, labels and split masks.
:func:`read_dataset` is the reader of commands that train (a graph-only file is an error saying
how to get a dataset); :func:`write` writes any of the formats. See ``docs/formats.md``.

Formats (the suffix decides; case does not matter):

``.npz``
    A graph: ``indptr``, ``indices`` (CSR), optional ``shape`` (rows, columns) and ``data``
    (float32, one weight per stored entry). A dataset: the keys of
    :data:`~moagcn.host.graphs.data.NPZ_KEYS` (and optionally ``data``).
``.mtx`` (``.mtx.gz``)
    Matrix Market coordinate files (scipy.io): field ``pattern``, ``real`` or ``integer``,
    symmetry ``general``, ``symmetric`` or ``skew-symmetric``; a symmetric file lists one
    triangle and is expanded to both. Rectangular matrices are allowed on the ``--graph`` path.
    Values of a ``real``/``integer`` file become the float32 edge weights (``data``); a
    ``pattern`` file has none. Stored zeros and repeated coordinates stay stored entries.
``.txt``, ``.tsv``, ``.csv``, ``.edges``, ``.el`` (each also ``.gz``)
    Edge lists in the SNAP style: one ``src dst`` pair of integer ids per line, separated by
    whitespace, tabs or a comma; ``#`` and ``%`` start comments (whole lines or line ends).
    Exactly two columns: a third (a weight, a time stamp) is an error naming the line, never
    silently dropped; unless the reader asks for weights (``read(..., weights=True)``, what a
    weighted S-SpMM's ``--graph`` does), then every line is ``src dst weight`` (a third
    column of decimal numbers: the float32 edge weights). Ids are used as given and
    ``num_nodes`` is the largest id + 1, unless a header comment ``# num_nodes: N`` declares
    it (what :func:`write` puts there, so isolated nodes at the end survive a round trip;
    SNAP's ``# Nodes: N`` counts distinct nodes, not the id range, and is not read).
``.pt``
    A PyTorch Geometric ``Data`` object written with ``torch.save(data, path)``. A .pt file is a
    pickle: loading it runs code from the file, so read only files you trust. Needs the optional
    torch-geometric extra. ``edge_weight`` (one float per edge) becomes the edge weights.

Direction. Every format describes the same matrix, the one the accelerators multiply by: CSR row
``v`` lists the nodes whose features are summed into ``v`` (``Z = A H``). An edge list and a PyG
``edge_index`` list messages: the line ``u v`` is a message from ``u`` to ``v`` (PyG's
convention), so it is the entry in row ``v``, column ``u``. The .npz and .mtx formats store the
matrix itself: entry (row ``i``, column ``j``) is the message ``j -> i``. Converting between
formats never transposes; a Matrix Market file written from an ``A[src, dst]`` adjacency (as
``torch_geometric.utils.to_scipy_sparse_matrix`` builds it) is read with its edges reversed,
which matters only when it is not symmetric (``moagcn graph info`` says whether it is).

Errors are :class:`~moagcn.errors.UserError` lines naming the file, the line or field, the
problem and the fix.

One module: every format's reader and writer share the suffix dispatch, the validation and
the wording of the errors; split per format they would repeat them.
"""

from __future__ import annotations

import gzip
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from moagcn.errors import UserError
from moagcn.host.graphs.data import BUILTIN, NPZ_KEYS, Dataset, load_npz
from moagcn.host.graphs.ops import CSRGraph, validate_csr

#: suffix -> format
SUFFIXES = {".npz": "npz", ".mtx": "mtx", ".txt": "edges", ".tsv": "edges", ".csv": "edges",
            ".edges": "edges", ".el": "edges", ".pt": "pt"}
#: formats that may also be gzip-compressed (``name.mtx.gz``, ``name.txt.gz``)
COMPRESSIBLE = ("mtx", "edges")
#: formats that hold the graph only (no features, labels or masks)
GRAPH_ONLY = ("mtx", "edges")
#: the largest node count an edge list may imply (ids are used as given)
MAX_NODES = 2 ** 31 - 1

FORMAT_NAMES = {"npz": "npz", "mtx": "Matrix Market", "edges": "edge list", "pt": "PyG Data"}
SUPPORTED = (".npz (CSR graph or dataset), .mtx (Matrix Market), .txt/.tsv/.csv/.edges/.el "
             "(edge list), .pt (PyG Data); .mtx and edge lists may end in .gz")
DATASET_HINT = ("give a PyG Data object saved with torch.save as .pt (x, y, train_mask, val_mask, "
                "test_mask) or an .npz dataset (" + ", ".join(NPZ_KEYS) + ")")

_INT = re.compile(r"[+-]?[0-9]+")
_NUM_NODES = re.compile(r"^[#%]\s*num_nodes\s*[:=]\s*(\S*)\s*$")
_MTX_FIELDS = ("pattern", "real", "integer")
_MTX_SYMMETRIES = ("general", "symmetric", "skew-symmetric")
_MTX_HEADER = "%%MatrixMarket matrix coordinate pattern general"


class FormatWarning(UserWarning):
    """Something in a file is not carried over (edge attributes, features written to a
    graph-only format); the message says what and how to keep it."""


@dataclass(eq=False)
class GraphFile:
    """What a graph file holds.

    Members
    -------
    graph : CSRGraph
        The aggregation matrix (row = target, columns = its sources); rectangular only from an
        .npz with ``shape`` or a rectangular .mtx.
    data : numpy.ndarray or None
        float32 edge weights, one per stored entry in CSR order (``hyscale run`` uses them, so
        does a GCN in ``moagcn train`` as the dataset's ``edge_weight``; the S-SpMM multiplies
        by the binary structure).
    dataset : Dataset or None
        The full dataset when the file holds features, labels and masks (its graph is
        ``graph``).
    format : str
        ``"npz"``, ``"mtx"``, ``"edges"`` or ``"pt"``.
    detail : str
        The layout, for messages and ``graph info`` (``"pattern symmetric"``, ``"dataset"``).
    no_dataset_reason : str or None
        Why a .pt file with some of ``x``, ``y`` and the masks is no dataset (the line
        :func:`read_dataset` raises).
    """

    graph: CSRGraph
    data: np.ndarray | None = None
    dataset: Dataset | None = None
    format: str = ""
    detail: str = ""
    no_dataset_reason: str | None = None

    @property
    def description(self) -> str:
        """``"Matrix Market, pattern symmetric"``: the format and layout in words."""
        name = FORMAT_NAMES.get(self.format, self.format)
        return f"{name}, {self.detail}" if self.detail else name


# -- suffixes and paths --------------------------------------------------------------------------

def file_format(path, what: str | None = None) -> tuple[str, bool]:
    """``(format, gzipped)`` of ``path`` by its suffix; an unknown one is a :class:`UserError`
    listing the supported suffixes."""
    p = Path(path)
    what = what or str(path)
    suffixes = [s.lower() for s in p.suffixes]
    gz = bool(suffixes) and suffixes[-1] == ".gz"
    suffix = (suffixes[-2] if len(suffixes) > 1 else "") if gz else \
        (suffixes[-1] if suffixes else "")
    fmt = SUFFIXES.get(suffix)
    if fmt is None or (gz and fmt not in COMPRESSIBLE):
        got = "".join(p.suffixes[-2:] if gz else p.suffixes[-1:]) or "no suffix"
        raise UserError(f"{what}: unknown graph format ({got}); name the file by its format: "
                        f"{SUPPORTED}")
    return fmt, gz


def _check_exists(p: Path, what: str) -> None:
    if not p.exists():
        raise UserError(f"{what}: no such file (check the path)")
    if p.is_dir():
        raise UserError(f"{what} is a folder; give a graph file: {SUPPORTED}")


def _check_input(p: Path, what: str, fmt: str) -> None:
    if p.stat().st_size == 0:
        raise UserError(f"{what}: empty file (0 bytes); {_EMPTY_FIX[fmt]}")


_EMPTY_FIX = {
    "npz": "write the graph with numpy.savez (indptr, indices) or `moagcn graph convert`",
    "mtx": f"a Matrix Market file starts with the header `{_MTX_HEADER}`, then `rows cols "
           "entries`, then one `row col` line per entry",
    "edges": "an edge list holds one `src dst` pair of node ids per line",
    "pt": "save a PyG Data object with torch.save(data, path)",
}


def _open_text(p: Path, gz: bool):
    return gzip.open(p, "rt") if gz else open(p)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


# -- building ------------------------------------------------------------------------------------

def csr_from_entries(rows, cols, n_rows: int, n_cols: int, data=None, what: str = "graph"
                     ) -> tuple[CSRGraph, np.ndarray | None]:
    """``(graph, data)`` with one stored entry per ``(rows[k], cols[k])``, kept as given
    (repeats and self loops stay); entries sorted by row, then column (stable), and ``data``
    permuted with them."""
    rows = np.asarray(rows, dtype=np.int64).ravel()
    cols = np.asarray(cols, dtype=np.int64).ravel()
    order = np.lexsort((cols, rows))
    rows, cols = rows[order], cols[order]
    if rows.size and (rows[0] < 0 or rows[-1] >= n_rows):
        k = 0 if rows[0] < 0 else rows.size - 1
        raise UserError(f"{what}: row {rows[k]} is out of range for {n_rows} rows")
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_rows), out=indptr[1:])
    graph = CSRGraph(indptr, cols, n_cols=n_cols, what=what)
    if data is not None:
        data = np.asarray(data, dtype=np.float32).ravel()[order]
    return graph, data


def _mirror_positions(graph: CSRGraph) -> np.ndarray:
    """Positions of the stored entries whose mirror :func:`make_undirected` adds.

    An unordered pair ``{u, v}`` (``u != v``) stored ``a`` times as ``(u, v)`` and ``b < a``
    times as ``(v, u)`` needs ``a - b`` more ``(v, u)``: the last ``a - b`` ``(u, v)`` entries
    (in storage order) are mirrored. Self loops are their own mirror.
    """
    r, c = graph.row_ids(), graph.indices
    pos = np.flatnonzero(r != c)
    if not pos.size:
        return pos
    n = graph.n_rows
    lo, hi = np.minimum(r[pos], c[pos]), np.maximum(r[pos], c[pos])
    d = (r[pos] > c[pos]).astype(np.int64)
    if n < 2 ** 31:      # one int64 key (pair, direction); a stable sort keeps storage order
        key = (lo * n + hi) * 2 + d
        order = np.argsort(key, kind="stable")
        key, pos = key[order], pos[order]
        pair_start = np.ones(pos.size, dtype=bool)
        pair_start[1:] = (key[1:] >> 1) != (key[:-1] >> 1)
        group_start = np.ones(pos.size, dtype=bool)
        group_start[1:] = key[1:] != key[:-1]
    else:
        order = np.lexsort((pos, d, hi, lo))
        lo, hi, d, pos = lo[order], hi[order], d[order], pos[order]
        pair_start = np.ones(pos.size, dtype=bool)
        pair_start[1:] = (lo[1:] != lo[:-1]) | (hi[1:] != hi[:-1])
        group_start = pair_start.copy()
        group_start[1:] |= d[1:] != d[:-1]
    gid = np.cumsum(group_start) - 1
    pid = np.cumsum(pair_start) - 1
    gcount, pcount = np.bincount(gid), np.bincount(pid)
    rank = np.arange(pos.size) - np.flatnonzero(group_start)[gid]
    opposite = pcount[pid] - gcount[gid]
    return np.sort(pos[rank >= opposite])


def missing_mirrors(graph: CSRGraph) -> int:
    """How many entries :func:`make_undirected` would add (0 for a symmetric structure)."""
    return int(_mirror_positions(graph).size)


def make_undirected(graph: CSRGraph, data=None, what: str = "graph"
                    ) -> tuple[CSRGraph, np.ndarray | None]:
    """``(graph, data)`` with every edge also stored in the other direction.

    Adds the reverse of each stored entry whose reverse is missing, counting repeats: a pair
    stored ``a`` times one way and ``b <= a`` times the other gets ``a - b`` reverse copies, so
    afterwards both directions appear ``max(a, b)`` times. Entries already mirrored, repeats and
    self loops stay as stored, nothing is merged or dropped, and a symmetric graph comes back
    unchanged. A reverse entry copies the weight of the entry it mirrors.
    """
    if graph.n_rows != graph.n_cols:
        raise UserError(f"{what}: --undirected needs a square adjacency (one node set); this "
                        f"graph is {graph.n_rows} x {graph.n_cols}: drop --undirected")
    mirror = _mirror_positions(graph)
    if not mirror.size:
        return graph, data
    r, c = graph.row_ids(), graph.indices
    rows = np.concatenate([r, c[mirror]])
    cols = np.concatenate([c, r[mirror]])
    if data is not None:
        data = np.concatenate([np.asarray(data, dtype=np.float32), np.asarray(data)[mirror]])
    return csr_from_entries(rows, cols, graph.n_rows, graph.n_cols, data, what)


# -- reading -------------------------------------------------------------------------------------

def read(path, *, undirected: bool = False, what: str | None = None,
         weights: bool = False) -> GraphFile:
    """Read any supported graph or dataset file (the format by its suffix).

    Parameters
    ----------
    path : str or Path
    undirected : bool
        Store every edge in both directions (:func:`make_undirected`); a symmetric graph is
        unchanged.
    weights : bool
        An edge list holds ``src dst weight`` lines (the weights become ``data``); the other
        formats carry their weights as always.
    what : str, optional
        How messages name the file (default: the path), e.g. ``"--graph g.mtx"``.

    Returns
    -------
    GraphFile

    Raises
    ------
    UserError
        A missing file, a folder, an empty file, an unknown suffix, or a malformed file (the
        line or field, the problem and the fix).
    """
    p = Path(path)
    what = what or str(path)
    _check_exists(p, what)
    fmt, gz = file_format(p, what)
    _check_input(p, what, fmt)
    try:
        if fmt == "npz":
            gf = _read_npz(p, what)
        elif fmt == "mtx":
            gf = _read_mtx(p, gz, what)
        elif fmt == "edges":
            gf = _read_edge_list(p, gz, what, weights)
        else:
            gf = _read_pt(p, what)
    except UserError:
        raise
    except (OSError, EOFError, UnicodeDecodeError) as exc:   # binary junk, a bad .gz
        raise UserError(f"{what}: not a readable {FORMAT_NAMES[fmt]} file ({_one_line(exc)}); "
                        f"{_EMPTY_FIX[fmt]}") from None
    if undirected:
        graph, data = make_undirected(gf.graph, gf.data, what)
        if graph is not gf.graph:
            ds = gf.dataset
            if ds is not None:
                ds = Dataset(ds.name, graph, ds.features, ds.labels, ds.train_mask,
                             ds.val_mask, ds.test_mask, data)
            gf = GraphFile(graph, data, ds, gf.format, gf.detail, gf.no_dataset_reason)
    return gf


def read_dataset(path, *, undirected: bool = False, what: str | None = None) -> Dataset:
    """The :class:`~moagcn.host.graphs.data.Dataset` in ``path`` (an .npz dataset or a .pt Data
    object with ``x``, ``y`` and the three masks).

    A file that holds a graph only is a :class:`UserError` saying how to get a dataset. Edge
    weights (.npz ``data``, .pt ``edge_weight``) become the dataset's ``edge_weight``.
    """
    p = Path(path)
    what = what or f"dataset {path}"
    if not p.exists():
        raise UserError(f"{what}: no such file (give the path of a dataset file, or one of the "
                        f"built-in datasets: {', '.join(BUILTIN)})")
    _check_exists(p, what)
    fmt, _ = file_format(p, what)
    if fmt == "npz" and p.stat().st_size:
        keys = _npz_keys(p)
        if keys is not None and not any(k in keys for k in NPZ_KEYS[2:]) \
                and {"indptr", "indices"} <= keys:
            raise UserError(f"{what}: the file holds a graph only (an .npz CSR: indptr, "
                            f"indices); training needs node features, labels and split masks: "
                            f"{DATASET_HINT}")
        return _dataset_from_npz(p, undirected)   # load_npz's messages for a partial dataset
    gf = read(p, undirected=undirected, what=what)
    if gf.dataset is None:
        if gf.no_dataset_reason:
            raise UserError(gf.no_dataset_reason)
        raise UserError(f"{what}: the file holds a graph only ({gf.description}); training "
                        f"needs node features, labels and split masks: {DATASET_HINT}")
    return gf.dataset


def warn_unused_weights(dataset: Dataset, what: str, user: str) -> None:
    """One :class:`FormatWarning` when ``dataset`` carries edge weights that ``user`` (a
    command) does not use, so they are never dropped silently."""
    if dataset.edge_weight is not None:
        warnings.warn(f"{what}: the edge weights are not used; {user} aggregates the binary "
                      "structure (moagcn train's GCN uses them)", FormatWarning, stacklevel=2)


def _dataset_from_npz(p: Path, undirected: bool) -> Dataset:
    ds = load_npz(p)
    if undirected:
        graph, data = make_undirected(ds.graph, ds.edge_weight, what=f"dataset {p}")
        if graph is not ds.graph:
            ds = Dataset(ds.name, graph, ds.features, ds.labels, ds.train_mask, ds.val_mask,
                         ds.test_mask, data)
    return ds


# -- .npz ----------------------------------------------------------------------------------------

def _npz_keys(p: Path) -> set | None:
    try:
        with np.load(p, allow_pickle=False) as archive:
            return set(archive.files)
    except Exception:  # not an archive: the reader names the problem
        return None


def _looks_like_npz(p: Path) -> bool:
    """Whether ``p`` starts like a zip archive (or an .npy array, which gets its own message)."""
    with open(p, "rb") as f:
        head = f.read(6)
    return head[:4] in (b"PK\x03\x04", b"PK\x05\x06") or head == b"\x93NUMPY"  # .npy: below


def read_npz_csr(path, what: str | None = None):
    """``(indptr, indices, n_cols, data)`` of an .npz graph, as ``--graph`` has always read it.

    ``n_cols`` is None when the file has no ``shape``; the column range is not checked (the
    caller knows the columns: rows of the features). ``data`` (float32) is None when absent.
    """
    p = Path(path)
    what = what or str(path)
    if not p.exists():
        raise UserError(f"{what}: no such file")
    if p.is_file() and p.stat().st_size and not _looks_like_npz(p):
        raise UserError(f"{what}: not an .npz archive (no zip header); write the graph with "
                        "numpy.savez(path, indptr=..., indices=...) or `moagcn graph convert`")
    try:
        archive = np.load(p, allow_pickle=False)
    except Exception as exc:
        raise UserError(f"{what}: not an .npz archive ({_one_line(exc)})") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise UserError(f"{what}: a single array, not a graph; give an .npz archive "
                        "with indptr and indices (CSR), e.g. from `moagcn graph synth`")
    with archive:
        missing = [k for k in ("indptr", "indices") if k not in archive]
        if missing:
            raise UserError(f"{what}: missing array(s) {', '.join(missing)}; an .npz "
                            "graph holds indptr and indices (and optionally shape and data)")
        indptr, indices = validate_csr(archive["indptr"], archive["indices"], what=what,
                                       columns=False)
        n_cols = None
        if "shape" in archive:
            shape = tuple(int(x) for x in np.asarray(archive["shape"]).ravel())
            if len(shape) != 2 or shape[0] != len(indptr) - 1:
                raise UserError(f"{what}: shape {shape} does not match "
                                f"{len(indptr) - 1} rows in indptr")
            n_cols = shape[1]
        data = None
        if "data" in archive.files:
            data = archive["data"]
            if data.dtype != np.float32:
                raise UserError(f"{what}: data (edge weights) must be float32, got "
                                f"{data.dtype}")
    return indptr, indices, n_cols, data


def _read_npz(p: Path, what: str) -> GraphFile:
    keys = _npz_keys(p)
    indptr, indices, n_cols, data = read_npz_csr(p, what)
    if data is not None and data.shape != indices.shape:
        raise UserError(f"{what}: data has shape {data.shape} but indices has {indices.size} "
                        "entries; store one float32 weight per entry (or drop data)")
    if keys is not None and all(k in keys for k in NPZ_KEYS):
        ds = load_npz(p)
        return GraphFile(ds.graph, data, ds, "npz", "dataset")
    graph = CSRGraph(indptr, indices, n_cols=n_cols, what=what)
    return GraphFile(graph, data, None, "npz", "CSR graph")


# -- Matrix Market -------------------------------------------------------------------------------

def _mtx_header(p: Path, gz: bool, what: str) -> tuple[str, str, tuple[int, int, int], int]:
    """``(field, symmetry, (rows, cols, entries), size line number)`` after checking the
    banner and the size line."""
    with _open_text(p, gz) as f:
        try:
            banner = f.readline()
        except (OSError, UnicodeDecodeError, EOFError) as exc:
            raise UserError(f"{what}: not a readable text file ({_one_line(exc)}); a Matrix "
                            f"Market file starts with `{_MTX_HEADER}`") from None
        toks = banner.split()
        if not toks or toks[0].lower() != "%%matrixmarket":
            raise UserError(f"{what}: line 1: no Matrix Market header (got "
                            f"{banner.strip()[:40]!r}); the file must start with "
                            f"`{_MTX_HEADER}` (field pattern, real or integer; symmetry "
                            "general or symmetric)")
        if len(toks) != 5:
            raise UserError(f"{what}: line 1: the header has {len(toks)} words; write "
                            f"`{_MTX_HEADER}` (%%MatrixMarket matrix coordinate FIELD SYMMETRY)")
        obj, layout, field, symmetry = (t.lower() for t in toks[1:])
        if obj != "matrix":
            raise UserError(f"{what}: line 1: object {toks[1]!r}; a graph is a Matrix Market "
                            f"'matrix' (header `{_MTX_HEADER}`)")
        if layout != "coordinate":
            raise UserError(f"{what}: line 1: format {toks[2]!r}; a graph is a sparse "
                            "'coordinate' matrix (a dense 'array' file is not read: write it "
                            "with scipy.io.mmwrite from a sparse matrix)")
        if field not in _MTX_FIELDS:
            raise UserError(f"{what}: line 1: field {toks[3]!r} is not supported; use "
                            f"{', '.join(_MTX_FIELDS)} (values become float32 edge weights)")
        if symmetry not in _MTX_SYMMETRIES:
            raise UserError(f"{what}: line 1: symmetry {toks[4]!r} is not supported; use "
                            f"{', '.join(_MTX_SYMMETRIES)}")
        lineno = 1
        for line in f:
            lineno += 1
            s = line.strip()
            if not s or s.startswith("%"):
                continue
            size = s.split()
            try:
                dims = tuple(int(t) for t in size)
            except ValueError:
                dims = ()
            if len(dims) != 3 or min(dims) < 0:
                raise UserError(f"{what}: line {lineno}: size line {s[:40]!r}; a coordinate "
                                "file gives `rows cols entries` (three non-negative integers) "
                                "after the header and comments")
            return field, symmetry, dims, lineno
    raise UserError(f"{what}: no size line after the header; add `rows cols entries` (e.g. "
                    "`3 3 2`) and one line per entry")


def _line_text(p: Path, gz: bool, n: int) -> str:
    with _open_text(p, gz) as f:
        for k, line in enumerate(f, 1):
            if k == n:
                return line.strip()[:60]
    return ""


def _read_mtx(p: Path, gz: bool, what: str) -> GraphFile:
    import scipy.io

    field, symmetry, (n_rows, n_cols, entries), size_line = _mtx_header(p, gz, what)
    try:
        if gz:
            with gzip.open(p, "rb") as f:
                mat = scipy.io.mmread(f)
        else:
            mat = scipy.io.mmread(str(p))
    except ValueError as exc:
        raise UserError(_mtx_error(p, gz, what, str(exc), n_rows, n_cols, entries,
                                   size_line)) from None
    mat = mat.tocoo()
    data = None if field == "pattern" else mat.data.astype(np.float32)
    graph, data = csr_from_entries(mat.row, mat.col, n_rows, n_cols, data, what)
    return GraphFile(graph, data, None, "mtx", f"{field} {symmetry}")


def _mtx_error(p: Path, gz: bool, what: str, msg: str, n_rows: int, n_cols: int, entries: int,
               size_line: int) -> str:
    size = f"the size line (line {size_line}) declares {n_rows} x {n_cols} with {entries} entries"
    m = re.match(r"Line (\d+): (.*)", msg)
    line, problem = (int(m.group(1)), m.group(2)) if m else (None, msg)
    text = _line_text(p, gz, line) if line else ""
    at = f"line {line} ({text!r})" if line else "the entries"
    if "Row index out of bounds" in problem or "Column index out of bounds" in problem:
        axis, n = ("row", n_rows) if problem.startswith("Row") else ("column", n_cols)
        return (f"{what}: {at}: {axis} index out of range 1..{n}; {size}: fix the entry or the "
                "size line (Matrix Market ids start at 1)")
    if "Invalid integer value" in problem or "Invalid floating-point value" in problem:
        hint = (" (comments are allowed only before the size line)" if text.startswith("%")
                else "")
        want = "`row col`" if "integer" in problem else "`row col value`"
        return (f"{what}: {at}: not a valid entry{hint}; each entry line is {want} with integer "
                "row and column ids")
    m = re.search(r"Expected another (\d+) lines", msg)
    if m:
        have = entries - int(m.group(1))
        return (f"{what}: {size} but the file holds {have}; fix the count on the size line "
                "(or restore the missing entries)")
    if "Too many lines" in problem:
        return (f"{what}: more entries than {entries} ({at} is extra); {size}: fix the count on "
                "the size line")
    return f"{what}: not a readable Matrix Market file ({at}: {problem}); check the file"


# -- edge lists ----------------------------------------------------------------------------------

def _strip_comment(line: str) -> str:
    cut = min((i for i in (line.find("#"), line.find("%")) if i >= 0), default=len(line))
    return line[:cut].strip()


def _edge_list_header(p: Path, gz: bool, what: str):
    """``(delimiter, declared num_nodes, its line)`` from the comments before the first edge."""
    declared, declared_line, delimiter = None, None, None
    with _open_text(p, gz) as f:
        try:
            for lineno, line in enumerate(f, 1):
                s = line.strip()
                if not s:
                    continue
                if s[0] in "#%":
                    m = _NUM_NODES.match(s)
                    if m:
                        try:
                            declared = int(m.group(1))
                        except ValueError:
                            declared = -1
                        if declared < 0:
                            raise UserError(f"{what}: line {lineno}: num_nodes "
                                            f"{m.group(1)!r} is not a non-negative integer; "
                                            "write `# num_nodes: N`")
                        declared_line = lineno
                    continue
                delimiter = "," if "," in _strip_comment(s) else None
                break
        except UnicodeDecodeError as exc:
            raise UserError(f"{what}: not a text file ({_one_line(exc)}); an edge list holds "
                            "one `src dst` pair of node ids per line") from None
    return delimiter, declared, declared_line


def _scan_edge_list(p: Path, gz: bool, what: str, declared, declared_line,
                    weights: bool = False):
    """The precise (slow) reader: the edges (and with ``weights`` each line's third column),
    or the first bad line as a :class:`UserError`."""
    src, dst, wts = [], [], []
    limit = declared if declared is not None else MAX_NODES
    with _open_text(p, gz) as f:
        for lineno, line in enumerate(f, 1):
            s = _strip_comment(line)
            if not s:
                continue
            toks = [t.strip() for t in s.split(",")] if "," in s else s.split()
            if weights:
                if len(toks) != 3:
                    raise UserError(f"{what}: line {lineno}: {len(toks)} columns "
                                    f"({s[:40]!r}); a weighted edge list holds `src dst "
                                    "weight` on every line")
                try:
                    wts.append(float(toks[2]))
                except ValueError:
                    raise UserError(f"{what}: line {lineno}: weight {toks[2][:20]!r} is not a "
                                    "number; the third column holds each edge's weight "
                                    "(e.g. 0.5)") from None
                toks = toks[:2]
            if len(toks) != 2:
                if len(toks) < 2:
                    raise UserError(f"{what}: line {lineno}: one id ({s[:40]!r}); each line "
                                    "of an edge list is a `src dst` pair")
                raise UserError(f"{what}: line {lineno}: {len(toks)} columns ({s[:40]!r}); an "
                                "edge list holds exactly `src dst` per line (weights or time "
                                "stamps are not read): keep the first two columns, e.g. "
                                "`cut -f1,2`, or comment the line out with #")
            ids = []
            for tok in toks:
                if not _INT.fullmatch(tok):
                    raise UserError(f"{what}: line {lineno}: {tok[:20]!r} is not an integer "
                                    "node id; each line is a `src dst` pair of integer ids "
                                    "(comment a header line out with #)")
                v = int(tok)
                if v < 0:
                    raise UserError(f"{what}: line {lineno}: node id {v} is negative; ids "
                                    "are used as given (num_nodes = largest id + 1): renumber "
                                    "the nodes from 0")
                if v >= limit:
                    if declared is not None:
                        raise UserError(f"{what}: line {lineno}: node id {v} is out of range "
                                        f"for num_nodes {declared} declared on line "
                                        f"{declared_line}; raise num_nodes or remove the edge")
                    raise UserError(f"{what}: line {lineno}: node id {v} is too large (at most "
                                    f"{MAX_NODES - 1}); ids are used as given: renumber the "
                                    "nodes 0..N-1")
                ids.append(v)
            src.append(ids[0])
            dst.append(ids[1])
    edges = np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)
    return (*edges, np.array(wts, dtype=np.float64)) if weights else edges


def _read_edge_list(p: Path, gz: bool, what: str, weights: bool = False) -> GraphFile:
    delimiter, declared, declared_line = _edge_list_header(p, gz, what)
    edges = None
    columns = 3 if weights else 2
    try:   # fast path; anything it rejects or that fails a check is re-read line by line
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # "input contained no data"
            with _open_text(p, gz) as f:
                if weights:
                    raw = np.loadtxt(f, dtype=np.float64, comments=("#", "%"),
                                     delimiter=delimiter, ndmin=2)
                    arr = raw[:, :2].astype(np.int64) if raw.size and raw.shape[1] == 3 \
                        and (raw[:, :2] == np.floor(raw[:, :2])).all() else np.zeros((1, 1))
                else:
                    arr = np.loadtxt(f, dtype=np.int64, comments=("#", "%"),
                                     delimiter=delimiter, ndmin=2)
        limit = declared if declared is not None else MAX_NODES
        if arr.size and arr.shape[1] == 2 and arr.min() >= 0 and arr.max() < limit:
            edges = (arr[:, 0], arr[:, 1], raw[:, 2]) if weights else (arr[:, 0], arr[:, 1])
        elif not arr.size:
            edges = (np.zeros(0, np.int64),) * columns
    except ValueError:
        edges = None
    if edges is None:
        edges = _scan_edge_list(p, gz, what, declared, declared_line, weights)
    src, dst = edges[:2]
    wts = edges[2] if weights else None
    if not src.size and declared is None:
        raise UserError(f"{what}: no edges (only comments or blank lines); an edge list holds "
                        "one `src dst` pair per line (declare `# num_nodes: N` for a graph "
                        "without edges)")
    n = declared if declared is not None else (int(max(src.max(), dst.max())) + 1)
    graph, data = csr_from_entries(dst, src, n, n, wts, what)     # row = target
    return GraphFile(graph, data, None, "edges",
                     "comma-separated" if delimiter == "," else "whitespace-separated")


# -- PyG .pt -------------------------------------------------------------------------------------

def _read_pt(p: Path, what: str) -> GraphFile:
    # lazy: keeps torch out of this module's import
    from moagcn.host.graphs.pyg import check_edge_index, from_pyg, require_pyg

    tg = require_pyg()
    import torch
    try:
        obj = torch.load(p, weights_only=False, map_location="cpu")
    except Exception as exc:
        raise UserError(f"{what}: not readable by torch.load ({_one_line(exc)}); save a PyG "
                        "Data object with torch.save(data, path)") from None
    if isinstance(obj, tg.data.HeteroData) or getattr(obj, "edge_index", None) is None:
        kind = type(obj).__name__
        raise UserError(f"{what}: holds a {kind}, not a PyG Data object with an edge_index; "
                        "save one graph with torch.save(data, path) (for a dataset object, "
                        "dataset[0])")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")        # PyG warns when it infers num_nodes
        n = getattr(obj, "num_nodes", None)
    src, dst, n = check_edge_index(obj.edge_index, None if n is None else int(n),
                                   what=f"{what}: edge_index")
    weight = getattr(obj, "edge_weight", None)
    data = None
    if weight is not None:
        w = weight.detach().cpu().numpy() if isinstance(weight, torch.Tensor) \
            else np.asarray(weight)
        if w.shape != (src.size,):
            raise UserError(f"{what}: edge_weight has shape {tuple(w.shape)}; expected one "
                            f"weight per edge ({src.size},)")
        data = w.astype(np.float32)
    if getattr(obj, "edge_attr", None) is not None:
        warnings.warn(f"{what}: edge_attr is not read (moagcn graphs carry one float32 weight "
                      "per edge: set data.edge_weight to keep one)", FormatWarning, stacklevel=3)
    graph, data = csr_from_entries(dst, src, n, n, data, what)
    dataset, why = None, None
    keys = ("x", "y", "train_mask", "val_mask", "test_mask")
    if any(getattr(obj, k, None) is not None for k in keys):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")   # edge weights: kept above as data
                dataset = from_pyg(obj, name=p.stem)
        except UserError as exc:
            why = f"{what}: not a dataset: {exc}"
    if dataset is not None:
        graph = dataset.graph
    return GraphFile(graph, data, dataset, "pt", "dataset" if dataset is not None else "graph",
                     why)


# -- writing -------------------------------------------------------------------------------------

def write(path, obj, *, data=None, what: str | None = None) -> Path:
    """Write a graph or dataset in the format of ``path``'s suffix.

    Parameters
    ----------
    path : str or Path
    obj : GraphFile, Dataset or CSRGraph
    data : numpy.ndarray, optional
        float32 edge weights (one per stored entry) of a graph; a :class:`GraphFile` brings its
        own.
    what : str, optional
        How messages name the file.

    What a format cannot hold is reported as one :class:`FormatWarning` (a dataset's features,
    labels and masks in .mtx or an edge list; edge weights in an edge list). An edge list and a
    .pt file need a square graph (one node set).
    """
    p = Path(path)
    what = what or str(path)
    fmt, gz = file_format(p, what)
    if isinstance(obj, GraphFile):
        data = obj.data if data is None else data
        obj = obj.dataset if obj.dataset is not None else obj.graph
    dataset = obj if isinstance(obj, Dataset) else None
    graph = dataset.graph if dataset is not None else obj
    if data is None and dataset is not None:
        data = dataset.edge_weight
    if not isinstance(graph, CSRGraph):
        raise UserError(f"{what}: expected a moagcn Dataset or CSRGraph to write, got "
                        f"{type(obj).__name__}")
    if data is not None:
        data = np.asarray(data)
        if data.dtype != np.float32 or data.shape != (graph.nnz,):
            raise UserError(f"{what}: edge weights must be float32, one per stored entry "
                            f"({graph.nnz},), got {data.dtype} {data.shape}")
    if fmt in ("edges", "pt") and graph.n_rows != graph.n_cols:
        raise UserError(f"{what}: a {graph.n_rows} x {graph.n_cols} matrix is not a graph on "
                        f"one node set; {FORMAT_NAMES[fmt]} files hold one, write it as .npz "
                        "or .mtx")
    if dataset is not None and fmt in GRAPH_ONLY:
        warnings.warn(f"{what}: {FORMAT_NAMES[fmt]} holds the graph only; the dataset's "
                      "features, labels and train/val/test masks are not written (use .npz "
                      "or .pt to keep them)", FormatWarning, stacklevel=2)
    if data is not None and fmt == "edges":
        warnings.warn(f"{what}: an edge list holds no weights; the {graph.nnz} edge weights "
                      "are not written (use .npz, .mtx or .pt to keep them)", FormatWarning,
                      stacklevel=2)
        data = None
    p.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "npz":
        _write_npz(p, graph, dataset, data)
    elif fmt == "mtx":
        _write_mtx(p, gz, graph, data)
    elif fmt == "edges":
        _write_edge_list(p, gz, graph)
    else:
        _write_pt(p, graph, dataset, data)
    return p


def _write_npz(p: Path, graph: CSRGraph, dataset: Dataset | None, data) -> None:
    extra = {} if data is None else {"data": data}
    with open(p, "wb") as f:        # a handle: numpy would append .npz to other spellings
        if dataset is None:
            np.savez(f, indptr=graph.indptr, indices=graph.indices,
                     shape=np.array(graph.shape, dtype=np.int64), **extra)
        else:
            np.savez_compressed(f, indptr=graph.indptr, indices=graph.indices,
                                features=dataset.features, labels=dataset.labels,
                                train_mask=dataset.train_mask, val_mask=dataset.val_mask,
                                test_mask=dataset.test_mask, **extra)


def _write_mtx(p: Path, gz: bool, graph: CSRGraph, data) -> None:
    import scipy.io
    import scipy.sparse as sp

    values = np.ones(graph.nnz) if data is None else data.astype(np.float64)
    mat = sp.coo_matrix((values, (graph.row_ids(), graph.indices)), shape=graph.shape)
    comment = (" written by moagcn: entry (i, j) is a message from node j to node i "
               "(CSR row i lists j); ids start at 1")
    opener = gzip.open(p, "wb") if gz else open(p, "wb")
    with opener as f:
        scipy.io.mmwrite(f, mat, comment=comment, symmetry="general",
                         field="pattern" if data is None else "real")


def _write_edge_list(p: Path, gz: bool, graph: CSRGraph) -> None:
    suffix = p.suffixes[-2 if gz else -1].lower()
    delimiter = {".csv": ",", ".edges": " ", ".el": " "}.get(suffix, "\t")
    pairs = np.stack([graph.indices, graph.row_ids()], axis=1)
    header = (f"moagcn edge list: {graph.n_nodes} nodes, {graph.nnz} edges; each line "
              "`src dst` is a message src -> dst (CSR row dst lists src)\n"
              f"num_nodes: {graph.n_nodes}")
    opener = gzip.open(p, "wt") if gz else open(p, "w")
    with opener as f:
        np.savetxt(f, pairs, fmt="%d", delimiter=delimiter, header=header, comments="# ")


def _write_pt(p: Path, graph: CSRGraph, dataset: Dataset | None, data) -> None:
    import torch

    # lazy: keeps torch out of this module's import
    from moagcn.host.graphs.pyg import to_pyg
    d = to_pyg(dataset if dataset is not None else graph)
    if data is not None:
        d.edge_weight = torch.from_numpy(data.copy())
    torch.save(d, p)

"""``moagcn graph``: ``synth`` (power-law graphs shaped like the MixGCN paper's datasets),
``info`` (a graph file's figures) and ``convert`` (between the formats of
:mod:`moagcn.host.graphs.formats`)."""

from __future__ import annotations

import time

import numpy as np

from moagcn.cli.common import (add_undirected_arg, one_line_warnings, output_path, report_path,
                               write_json)
from moagcn.core.generators import GAMMA
from moagcn.core.graph import sort_rows
from moagcn.errors import UserError


def cmd_graph_synth(args) -> int:
    # lazy: keeps the host runtime out of this module's import
    from moagcn.host.graphs.generators import SHAPES, synth_like
    out = output_path(args.out, "--out")
    if out.suffix != ".npz":
        raise UserError(f"--out {args.out}: the graph is written as an .npz archive; name the "
                        "file G.npz")
    if args.like not in SHAPES:
        raise UserError(f"--like {args.like}: choose one of {', '.join(SHAPES)}")
    t0 = time.perf_counter()
    indptr, indices, info = synth_like(args.like, args.scale, args.seed, args.max_degree,
                                       args.gamma)
    n = indptr.size - 1
    np.savez(out, indptr=indptr, indices=indices, shape=np.array([n, n]))
    info["wall_s"] = round(time.perf_counter() - t0, 2)
    info["path"] = str(out)
    if args.report:
        write_json(args.report, info)
    print(f"graph like {args.like} at scale {args.scale}: {n} nodes, {indices.size} entries "
          f"(mean degree {info['mean_degree']:.1f}, largest {info['max_degree']}), "
          f"{info['wall_s']} s -> {out}")
    return 0


# -- info ----------------------------------------------------------------------------------------

def _stats(deg: np.ndarray) -> dict:
    """min, mean, median, max of a degree array, and the first node of the largest."""
    if not deg.size:
        return {"min": None, "mean": None, "median": None, "max": None, "top_node": None}
    top = int(np.argmax(deg))
    return {"min": int(deg.min()), "mean": float(deg.mean()), "median": float(np.median(deg)),
            "max": int(deg[top]), "top_node": top}


def graph_figures(graph, data=None) -> dict:
    """The figures ``moagcn graph info`` prints, as a JSON-ready dict.

    Degrees count stored entries: the in-degree of node ``v`` is the length of row ``v`` (the
    sources summed into ``v``), the out-degree the entries in column ``v``. An isolated node has
    no entry in its row or its column (a self loop is an entry). Duplicates are entries beyond
    the first of each (row, column) pair. The node-level figures (isolated nodes, self loops,
    symmetry, bandwidth) are None for a rectangular matrix.
    """
    # lazy: keeps the host runtime out of this module's import
    from moagcn.host.graphs.formats import missing_mirrors

    rows, cols = graph.shape
    square = rows == cols
    r, c = graph.row_ids(), graph.indices
    deg = graph.degrees()
    col_deg = np.bincount(c, minlength=cols)
    s = sort_rows(graph.indptr, c)
    duplicates = int(np.count_nonzero((s[1:] == s[:-1]) & (r[1:] == r[:-1])))
    fig = {"rows": rows, "cols": cols, "nodes": rows if square else None, "entries": graph.nnz,
           "in_degree": _stats(deg), "out_degree": _stats(col_deg),
           "empty_rows": int(np.count_nonzero(deg == 0)), "duplicate_entries": duplicates,
           "isolated_nodes": None, "self_loop_entries": None, "self_loop_nodes": None,
           "symmetric": None, "missing_mirrors": None, "bandwidth": None, "bandwidth_rcm": None,
           "edge_weights": None}
    if square:
        loops = r == c
        symmetric = bool(graph.is_symmetric())
        fig.update(isolated_nodes=int(np.count_nonzero((deg == 0) & (col_deg == 0))),
                   self_loop_entries=int(np.count_nonzero(loops)),
                   self_loop_nodes=int(np.unique(r[loops]).size),
                   symmetric=symmetric,
                   missing_mirrors=0 if symmetric else missing_mirrors(graph),
                   bandwidth=graph.bandwidth(),
                   bandwidth_rcm=graph.bandwidth(graph.rcm_order()) if rows else 0)
    if data is not None:
        fig["edge_weights"] = ({"min": float(data.min()), "max": float(data.max())} if data.size
                               else {"min": None, "max": None})
    return fig


def _deg_line(name: str, st: dict, hub: str) -> str:
    if st["max"] is None:
        return f"{name}: no nodes"
    return (f"{name}: min {st['min']}, mean {st['mean']:.2f}, median {st['median']:g}, max "
            f"{st['max']} ({hub} node {st['top_node']})")


def cmd_graph_info(args) -> int:
    # lazy: keeps the host runtime out of this module's import
    from moagcn.host.graphs import formats
    rpath = report_path(args.report) if args.report else None
    with one_line_warnings():
        gf = formats.read(args.graph, undirected=args.undirected)
    g = gf.graph
    fig = graph_figures(g, gf.data)
    shape = f"{fig['nodes']} nodes" if fig["nodes"] is not None else \
        f"{fig['rows']} x {fig['cols']} matrix (rectangular: rows and columns are different nodes)"
    lines = [f"{args.graph} ({gf.description}{', --undirected' if args.undirected else ''}): "
             f"{shape}, {fig['entries']} entries (stored: self loops and duplicates count)",
             _deg_line("in-degree (entries per row)", fig["in_degree"], "top hub:")]
    if not fig["symmetric"]:
        lines.append(_deg_line("out-degree (entries per column)", fig["out_degree"],
                               "top source:"))
    if fig["nodes"] is not None:
        lines += [f"isolated nodes {fig['isolated_nodes']} (no entry in row or column), rows "
                  f"without entries {fig['empty_rows']}",
                  f"self loops {fig['self_loop_entries']} (on {fig['self_loop_nodes']} "
                  f"node(s)), duplicate entries {fig['duplicate_entries']}",
                  "symmetric: yes" if fig["symmetric"] else
                  f"symmetric: no (--undirected would add {fig['missing_mirrors']} entries)",
                  f"bandwidth {fig['bandwidth']} as numbered, {fig['bandwidth_rcm']} after RCM"]
    else:
        lines.append(f"rows without entries {fig['empty_rows']}, duplicate entries "
                     f"{fig['duplicate_entries']}")
    if fig["edge_weights"] is not None:
        w = fig["edge_weights"]
        lines.append(f"edge weights: float32, min {w['min']:g}, max {w['max']:g}")
    ds = gf.dataset
    if ds is not None:
        fig["dataset"] = {"features": ds.n_features, "classes": ds.n_classes,
                          "train": int(ds.train_mask.sum()), "val": int(ds.val_mask.sum()),
                          "test": int(ds.test_mask.sum())}
        d = fig["dataset"]
        lines.append(f"dataset: {d['features']} features, {d['classes']} classes, "
                     f"train/val/test {d['train']}/{d['val']}/{d['test']}")
    else:
        fig["dataset"] = None
    print("\n".join(lines))
    if rpath is not None:
        write_json(rpath, {"path": args.graph, "format": gf.format, "layout": gf.detail,
                           "undirected": bool(args.undirected), **fig})
        print(f"report: {rpath}")
    return 0


# -- convert -------------------------------------------------------------------------------------

def cmd_graph_convert(args) -> int:
    # lazy: keeps the host runtime out of this module's import
    from moagcn.host.graphs import formats
    fmt, _ = formats.file_format(args.output, f"OUT {args.output}")
    out = output_path(args.output, "OUT")
    with one_line_warnings():
        gf = formats.read(args.input, undirected=args.undirected)
        formats.write(out, gf, what=args.output)
    g = gf.graph
    shape = f"{g.n_rows} nodes" if g.n_rows == g.n_cols else f"{g.n_rows} x {g.n_cols}"
    held = ("dataset" if gf.dataset is not None else "graph") + \
        (" with edge weights" if gf.data is not None else "")
    print(f"{args.input} ({gf.description}): {held}, {shape}, {g.nnz} entries -> {out} "
          f"({formats.FORMAT_NAMES[fmt]})")
    return 0


def register(sub) -> None:
    """Add the ``graph`` command to the CLI's sub-parsers."""
    # lazy: keeps the host runtime out of this module's import
    from moagcn.host.graphs.generators import SHAPES
    g = sub.add_parser("graph", help="make, inspect and convert graphs for the accelerators")
    g_sub = g.add_subparsers(dest="graph_command", required=True, metavar="GRAPH_COMMAND")
    s = g_sub.add_parser("synth", help="a power-law graph shaped like a paper's dataset",
                         description="Write a power-law graph (CSR .npz: indptr, indices, "
                                     "shape) with the named dataset's node and entry counts "
                                     "times --scale and its degree skew (see "
                                     "docs/sspmm.md, 'Synthetic graphs').")
    s.add_argument("--like", required=True, metavar="NAME", help=", ".join(SHAPES))
    s.add_argument("--scale", type=float, default=1.0,
                   help="fraction of the dataset's nodes and entries, in (0, 1] (default 1)")
    s.add_argument("--seed", type=int, default=0, help="seed of the graph (default 0)")
    s.add_argument("--max-degree", type=float, default=None,
                   help="largest expected degree (default: the dataset's)")
    s.add_argument("--gamma", type=float, default=GAMMA,
                   help=f"exponent of the degree law (default {GAMMA})")
    s.add_argument("--out", required=True, metavar="G.npz", help="the graph, a CSR .npz")
    s.add_argument("--report", metavar="R.json", help="the graph's figures as JSON")
    s.set_defaults(func=cmd_graph_synth)

    i = g_sub.add_parser("info", help="a graph file's nodes, degrees, self loops, duplicates, "
                                      "symmetry and bandwidth",
                         description="Read a graph or dataset file (any format of "
                                     "docs/formats.md) and print its node and entry counts, "
                                     "degree statistics, isolated nodes, self loops, duplicate "
                                     "entries, symmetry and bandwidth before and after RCM.")
    i.add_argument("graph", metavar="G", help="the graph: .npz, .mtx, edge list or PyG .pt")
    add_undirected_arg(i)
    i.add_argument("--report", metavar="R.json", help="the same figures as JSON")
    i.set_defaults(func=cmd_graph_info)

    c = g_sub.add_parser("convert", help="convert a graph or dataset between formats",
                         description="Read IN and write OUT, each in the format of its suffix "
                                     "(.npz, .mtx, .txt/.tsv/.csv/.edges/.el, .pt; see "
                                     "docs/formats.md). A dataset written to a graph-only "
                                     "format (.mtx, edge list) keeps its graph only, with a "
                                     "warning.")
    c.add_argument("input", metavar="IN", help="the graph or dataset to read")
    c.add_argument("output", metavar="OUT", help="the file to write, in the format of its suffix")
    add_undirected_arg(c)
    c.set_defaults(func=cmd_graph_convert)

"""``moagcn graph synth``: power-law graphs shaped like the MixGCN paper's datasets."""

from __future__ import annotations

import time

import numpy as np

from .cli_common import output_path, write_json
from .errors import UserError


def cmd_graph_synth(args) -> int:
    from moagcn.host.synthetic import SHAPES, synth_like
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


def register(sub) -> None:
    """Add the ``graph`` command to the CLI's sub-parsers."""
    from moagcn.host.synthetic import GAMMA, SHAPES
    g = sub.add_parser("graph", help="make graphs for the accelerators")
    g_sub = g.add_subparsers(dest="graph_command", required=True, metavar="GRAPH_COMMAND")
    s = g_sub.add_parser("synth", help="a power-law graph shaped like a paper's dataset",
                         description="Write a power-law graph (CSR .npz: indptr, indices, "
                                     "shape) with the named dataset's node and entry counts "
                                     "times --scale and its degree skew (see "
                                     "docs/sspmm.md, 'Synthetic graphs').")
    s.add_argument("--like", required=True, metavar="NAME", help=", ".join(SHAPES))
    s.add_argument("--scale", type=float, default=1.0,
                   help="fraction of the dataset's nodes and entries, in (0, 1] (default 1)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--max-degree", type=float, default=None,
                   help="largest expected degree (default: the dataset's)")
    s.add_argument("--gamma", type=float, default=GAMMA,
                   help=f"exponent of the degree law (default {GAMMA})")
    s.add_argument("--out", required=True, metavar="G.npz")
    s.add_argument("--report", metavar="R.json", help="the graph's figures as JSON")
    s.set_defaults(func=cmd_graph_synth)

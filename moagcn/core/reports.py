"""What every benchmark and experiment writes: its output folder, CSV tables, matplotlib
(headless), and a torch thread count that is restored afterwards."""

from __future__ import annotations

import contextlib
import csv
from pathlib import Path

from moagcn.errors import UserError


def output_dir(path, what: str = "--out") -> Path:
    """The folder ``path``, made if needed (a :class:`UserError` names it if it cannot be)."""
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{what} {out}: cannot create the directory "
                        f"({exc.strerror or exc})") from None
    return out


def write_csv(path, rows: list[dict], fields=None) -> Path:
    """``rows`` as CSV with ``fields`` as columns (default: the first row's keys; keys not in
    ``fields`` are left out)."""
    fields = list(fields) if fields is not None else list(rows[0]) if rows else []
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    return Path(path)


def print_targets(targets: list[dict]) -> None:
    """The targets table every experiment prints: one Markdown row per target with ``target``,
    ``ours``, ``paper`` and ``verdict``."""
    print("| target | ours | paper | verdict |")
    print("|---|---|---|---|")
    for t in targets:
        print(f"| {t['target']} | {t['ours']} | {t['paper']} | {t['verdict']} |")


def pyplot():
    """matplotlib's pyplot on the headless Agg backend."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


@contextlib.contextmanager
def torch_threads(n: int):
    """torch's intra-op thread count set to ``n`` inside the block, restored after it."""
    import torch
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def json_default(o):
    """``json.dumps(..., default=json_default)``: numpy scalars and arrays, torch tensors."""
    import numpy as np
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if hasattr(o, "tolist") and type(o).__module__.startswith("torch"):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")

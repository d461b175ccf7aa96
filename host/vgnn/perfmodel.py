"""A learned performance model of the sparse devices (vGNN Sec. 4.2-4.3, Table 7).

vGNN partitions a graph over heterogeneous GPUs in proportion to what a regression model
predicts each GPU needs for its share. This module builds the same kind of model for the
sparse devices of moagcn (torch on the CPU, and any accelerator design on its cycle model or
RTL): it predicts the time of one aggregation ``Z = A H`` of a graph at a feature width on a
device.

The pipeline (docs/perfmodel.md has the measured numbers):

1. **Devices** (:func:`~moagcn.host.devices.select.parse_devices`): ``"sspmm:lanes=32,sspmm:lanes=8:clock_mhz=150,cpu"``;
   each :class:`AcceleratorChoice` has a stable :attr:`~AcceleratorChoice.key`, a
   :meth:`~AcceleratorChoice.capability` (peak adds per second) and builds its
   :class:`~moagcn.core.device.SparseDevice` (:meth:`~AcceleratorChoice.make`).
2. **Augmentation** (:func:`~moagcn.host.vgnn.augment.sample_subgraphs`): induced sub-graphs of one dataset at several
   node ratios and seeds, and the worker blocks of a METIS split of each (rows with the columns
   they use, as partition parallelism hands them to a device), each aggregated at several
   feature widths on every device
   (:func:`~moagcn.host.vgnn.augment.aggregation_time`: cycles / clock on an accelerator, the median wall time on the CPU).
3. **Features** (:func:`~moagcn.host.vgnn.features.graph_features`, :func:`~moagcn.host.vgnn.features.device_features`, :func:`~moagcn.host.vgnn.features.cost_terms`): graph
   statistics, device parameters and *cost terms*, graph sizes divided by device rates (e.g.
   ``nnz * F / (lanes * clock)``: the additions at peak rate, in seconds).
4. **Regression** (:func:`fit`): a per-device non-negative least-squares sum of the cost terms
   (relative error; the *baseline*) times ``exp(r(x))``, where ``r`` is one of several
   scikit-learn regressors fitted on the log residual. Every regressor is scored on a held-out
   split of the sub-graphs (MSE, MAE, MAPE, time per prediction) and the lowest MAPE wins.
   The baseline makes the model extrapolate in graph size (trees cannot); the regressor
   corrects what a sum of terms misses (hub rows, tiling, lane padding). ``baseline=False``
   fits the regressors on ``log(time)`` directly, the plain vGNN recipe, for comparison.
5. **Persistence** (:class:`PerfModel`): JSON holding the device specs, the training samples
   and the chosen regressor's name and hyper-parameters; loading refits (all regressors are
   seeded, so the loaded model predicts exactly what the saved one did). No pickle.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from moagcn.core.names import (PERF_ENTRY_WIDTHS, PERF_HEADS, PERF_KEEPS, PERF_RATIOS,
                               PERF_SEEDS, PERF_TEST_FRACTION, PERF_WIDTHS)
from moagcn.errors import UserError
from moagcn.host.devices.select import AcceleratorChoice
from moagcn.host.graphs.ops import CSRGraph
from moagcn.host.devices.pair import entry_devices, scores_choice, scores_id
from moagcn.host.vgnn.augment import (SubGraph, aggregation_time, check_keeps, check_widths,
                                      entry_op_time, load_graph, sample_subgraphs)
from moagcn.host.vgnn.features import (DEVICE_FEATURES, GRAPH_FEATURES, SCORES_FEATURES,
                                       check_ops, device_features, graph_features,
                                       op_functions, scores_device_features)
from moagcn.host.vgnn.regressors import REGRESSORS, Score, fit_baseline, make_regressor, mape

FORMAT = "moagcn-perfmodel"
FORMAT_VERSION = 4


# -- the model -----------------------------------------------------------------------------------

@dataclass
class Samples:
    """Training runs: graph features (rows of :data:`GRAPH_FEATURES`), the device key, the
    measured seconds, the sub-graph each run came from and the operation timed (:data:`OPS`;
    None: every run an aggregation, ``sum``)."""

    graph: np.ndarray
    device: list[str]
    time_s: np.ndarray
    group: list[str]
    op: list[str] | None = None

    def __post_init__(self):
        if self.op is None:
            self.op = ["sum"] * len(self.device)

    def as_dict(self) -> dict:
        return {"columns": list(GRAPH_FEATURES), "graph": self.graph.tolist(),
                "device": list(self.device), "time_s": self.time_s.tolist(),
                "group": list(self.group), "op": list(self.op)}

    def of(self, op: str) -> "Samples":
        """The runs of one operation."""
        sel = np.array([o == op for o in self.op], dtype=bool)
        idx = np.flatnonzero(sel)
        return Samples(self.graph[sel], [self.device[i] for i in idx], self.time_s[sel],
                       [self.group[i] for i in idx], [op] * idx.size)

    @classmethod
    def concat(cls, parts: Sequence["Samples"]) -> "Samples":
        return cls(np.concatenate([p.graph for p in parts]).reshape(-1, len(GRAPH_FEATURES)),
                   [k for p in parts for k in p.device],
                   np.concatenate([p.time_s for p in parts]),
                   [g for p in parts for g in p.group], [o for p in parts for o in p.op])

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Samples":
        if list(d["columns"]) != list(GRAPH_FEATURES):
            raise UserError(f"performance model samples have columns {d['columns']}; this "
                            f"moagcn expects {list(GRAPH_FEATURES)}: fit the model again")
        return cls(np.asarray(d["graph"], dtype=np.float64).reshape(-1, len(GRAPH_FEATURES)),
                   [str(k) for k in d["device"]], np.asarray(d["time_s"], dtype=np.float64),
                   [str(g) for g in d["group"]], [str(o) for o in d["op"]])


class _Fitted:
    """Baseline coefficients per device and one regressor on the log residual, for one
    operation (:data:`OPS`: its cost terms and features, :func:`op_functions`)."""

    def __init__(self, name: str, params: Mapping[str, Any], use_baseline: bool,
                 device_rows: Mapping[str, np.ndarray], op: str = "sum"):
        self.name, self.params, self.use_baseline = name, dict(params), use_baseline
        self.device_rows = device_rows
        self.terms, self.features, _ = op_functions(op)
        self.coef: dict[str, np.ndarray] = {}
        self.regressor = None

    def _design(self, G: np.ndarray, keys: Sequence[str]):
        D = np.stack([self.device_rows[k] for k in keys])
        return self.features(G, D), self.terms(G, D)

    def _base(self, T: np.ndarray, keys: Sequence[str]) -> np.ndarray:
        if not self.use_baseline:
            return np.ones(len(keys))
        C = np.stack([self.coef[k] for k in keys])
        return np.maximum((T * C).sum(axis=1), 1e-15)

    def fit(self, G: np.ndarray, keys: Sequence[str], y: np.ndarray) -> "_Fitted":
        X, T = self._design(G, keys)
        if self.use_baseline:
            keys_arr = np.asarray(keys)
            for k in dict.fromkeys(keys):
                sel = keys_arr == k
                self.coef[k] = fit_baseline(T[sel], y[sel])
        resid = np.log(y) - np.log(self._base(T, keys))
        self.regressor = make_regressor(self.name, self.params).fit(X, resid)
        return self

    def predict(self, G: np.ndarray, keys: Sequence[str]) -> np.ndarray:
        X, T = self._design(G, keys)
        return self._base(T, keys) * np.exp(self.regressor.predict(X))


@dataclass
class FitReport:
    """What :func:`fit` measured: the scores of every regressor on the held-out split (the
    chosen one first in :attr:`chosen`), and the split's size."""

    scores: list[Score]
    chosen: str
    train_runs: int
    test_runs: int
    sampling_s: float = 0.0
    fitting_s: float = 0.0

    def as_dict(self) -> dict:
        return {"chosen": self.chosen, "train_runs": self.train_runs,
                "test_runs": self.test_runs, "sampling_s": self.sampling_s,
                "fitting_s": self.fitting_s, "scores": [s.as_dict() for s in self.scores]}


def _report(rep: Mapping[str, Any] | None) -> FitReport | None:
    """A :class:`FitReport` from its dict (None stays None)."""
    if rep is None:
        return None
    return FitReport(
        [Score(s["regressor"], s["mse_s2"], s["mae_s"], s["mape"], s["us_per_prediction"])
         for s in rep["scores"]], rep["chosen"], rep["train_runs"], rep["test_runs"],
        rep.get("sampling_s", 0.0), rep.get("fitting_s", 0.0))


class PerfModel:
    """Predicts the seconds of one aggregation (and, fitted with the per-entry ``ops``, of
    GAT's weighted aggregation and SDDMM) on the devices it was fitted for.

    Build one with :func:`fit`, or :meth:`load` a saved one. The model is defined by its JSON
    state (devices, samples, regressor name and hyper-parameters); construction refits from it.

    Members
    -------
    devices : dict
        Device key -> :class:`AcceleratorChoice`.
    regressor : str
        The chosen regressor's name (a key of :data:`REGRESSORS`).
    report : FitReport or None
        The held-out scores of the fit that produced the model.
    """

    def __init__(self, state: Mapping[str, Any]):
        if state.get("format") != FORMAT:
            raise UserError("not a moagcn performance model (no 'format': "
                            f"'{FORMAT}'); fit one with `moagcn perfmodel fit`")
        if state.get("version") != FORMAT_VERSION:
            raise UserError(f"performance model version {state.get('version')} is not "
                            f"{FORMAT_VERSION}; fit it again with this moagcn")
        self.state = dict(state)
        self.devices = {d["key"]: AcceleratorChoice.from_describe(d) for d in state["devices"]}
        #: the operations fitted (:data:`OPS`): ``sum`` always, the per-entry ones for GAT
        self.ops = list(state.get("ops", ["sum"]))
        rows = {"sum": {d["key"]: np.array([float(d["features"][k]) for k in DEVICE_FEATURES])
                        for d in state["devices"]}}
        rows["weighted"] = rows["sum"]
        if "sddmm" in self.ops:
            rows["sddmm"] = {d["key"]: np.array([float(d["scores"]["features"][k])
                                                 for k in SCORES_FEATURES])
                             for d in state["devices"]}
        self._device_rows = rows["sum"]
        self.samples = Samples.from_dict(state["samples"])
        self.regressor = state["regressor"]["name"]
        self.baseline = bool(state.get("baseline", True))
        self.report = _report(state.get("report"))
        #: per-entry operation -> its chosen regressor's name and its held-out scores
        self.op_regressors = {op: r["name"] for op, r in state.get("op_regressors", {}).items()}
        self.op_reports = {op: _report(r) for op, r in state.get("op_reports", {}).items()}
        self._fitted = {}
        for op in self.ops:
            reg = state["regressor"] if op == "sum" else state["op_regressors"][op]
            s = self.samples.of(op)
            self._fitted[op] = _Fitted(reg["name"], reg["params"], self.baseline, rows[op],
                                       op).fit(s.graph, s.device, s.time_s)

    # -- persistence ---------------------------------------------------------------------------

    def save(self, path) -> Path:
        """Write the model as JSON (indented, final newline)."""
        p = Path(path)
        try:
            p.write_text(json.dumps(self.state, indent=1) + "\n")
        except OSError as exc:
            raise UserError(f"cannot write the performance model {path}: "
                            f"{exc.strerror or exc}") from None
        return p

    @classmethod
    def load(cls, path, devices: Iterable[AcceleratorChoice] | None = None) -> "PerfModel":
        """Read a model saved by :meth:`save`; with ``devices``, check it covers them."""
        p = Path(path)
        if not p.exists():
            raise UserError(f"--perf-model {path}: no such file (write one with `moagcn perfmodel "
                            "fit ... --out M.json`)")
        try:
            state = json.loads(p.read_text())
        except (OSError, ValueError) as exc:
            raise UserError(f"--perf-model {path}: not a readable JSON performance model "
                            f"({exc})") from None
        try:
            model = cls(state)
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, UserError):
                raise UserError(f"--perf-model {path}: {exc}") from None
            raise UserError(f"--perf-model {path}: a performance model without the expected "
                            f"fields ({exc!r}); fit it again") from None
        if devices is not None:
            model.require(devices, str(path))
        return model

    def require(self, devices: Iterable[AcceleratorChoice], where: str = "the performance model"
                ) -> None:
        """Raise UserError naming the first of ``devices`` the model was not fitted for."""
        for dev in devices:
            if dev.key not in self.devices:
                wanted = ",".join([*self.devices, dev.key])
                fitted_on = str(self.state.get("dataset", "D"))
                if "+" in fitted_on:      # several graphs (labels): name them with commas
                    fitted_on = "D[,D...]"
                raise UserError(
                    f"{where} was fitted for {', '.join(self.devices)}; it has no device "
                    f"{dev.key!r}. Fit a model that includes it: moagcn perfmodel fit "
                    f"--devices {wanted} --dataset {fitted_on} "
                    "--out M.json")

    # -- prediction ----------------------------------------------------------------------------

    def _key(self, device: AcceleratorChoice | str) -> str:
        key = device.key if isinstance(device, AcceleratorChoice) else str(device)
        if key not in self.devices:
            dev = device if isinstance(device, AcceleratorChoice) else AcceleratorChoice("model", key, text=key)
            self.require([dev])
        return key

    def require_ops(self, ops: Iterable[str], where: str = "the performance model") -> None:
        """Raise UserError unless the model was fitted for every one of ``ops``."""
        missing = [op for op in ops if op not in self.ops]
        if missing:
            raise UserError(
                f"{where} was fitted for {', '.join(self.ops)} only; a GAT also needs "
                f"{', '.join(missing)} (its attention's per-entry products). Fit it again with "
                "--ops sum,weighted,sddmm (the devices' S-SpMMs with :weighted=true)")

    def predict(self, graph: CSRGraph, width: int, device: AcceleratorChoice | str,
                keep: float = 1.0, op: str = "sum", heads: int = 1) -> float:
        """Predicted seconds of one ``op`` (:data:`OPS`; default an aggregation) of ``graph``
        at ``width`` features on ``device`` (a spec or its key), under an output mask keeping
        a ``keep`` fraction of the result (1: no mask). For the per-entry products ``width``
        is one head's columns of ``heads``, and ``keep`` the SDDMM's kept (entry, head)
        pairs."""
        key = self._key(device)
        self.require_ops([op])
        return float(self._fitted[op].predict(
            graph_features(graph, width, keep, heads)[None, :], [key])[0])

    def predict_features(self, G: np.ndarray, keys: Sequence[str], op: str = "sum"
                         ) -> np.ndarray:
        """Predicted seconds of many runs of ``op`` at once: rows of :data:`GRAPH_FEATURES`
        and device keys."""
        keys = [self._key(k) for k in keys]
        self.require_ops([op])
        return self._fitted[op].predict(np.asarray(G, dtype=np.float64), keys)

    def describe(self) -> str:
        """One line: the regressor, the devices, the samples."""
        ops = "".join(f"; {op}: {self.op_regressors[op]}" for op in self.ops if op != "sum")
        return (f"{self.regressor}{ops} on {len(self.samples.time_s)} runs of "
                f"{self.state.get('dataset', '?')} sub-graphs; devices: "
                f"{', '.join(self.devices)}")


# -- collecting runs and fitting -----------------------------------------------------------------

def collect(subgraphs: Sequence[SubGraph], widths: Sequence[int], devices: Sequence[AcceleratorChoice],
            device_kind: str = "model", progress: bool = False,
            keeps: Sequence[float] = PERF_KEEPS) -> Samples:
    """Time every (sub-graph, width, kept fraction, device) run (``keeps``: the output masks'
    kept fractions, 1 for none); a progress bar over the runs with ``progress``."""
    from tqdm import tqdm
    check_widths(widths)
    keeps = check_keeps(keeps)
    made = [(d.key, d.on(device_kind).make()) for d in devices]
    G, keys, times, groups = [], [], [], []
    bar = tqdm(total=len(subgraphs) * len(widths) * len(keeps) * len(made),
               desc="perfmodel runs", unit="run", disable=not progress, file=sys.stderr)
    with bar:
        for sub, width, keep in ((s, w, k) for s in subgraphs for w in widths for k in keeps):
            feats = graph_features(sub.graph, int(width), keep)
            for key, dev in made:
                t = aggregation_time(dev, sub.graph, int(width), keep=keep)
                bar.update(1)
                if not t > 0:
                    continue        # nothing ran: no time to learn from (or its log)
                G.append(feats)
                keys.append(key)
                times.append(t)
                groups.append(sub.group or sub.name)
    return Samples(np.array(G, dtype=np.float64).reshape(-1, len(GRAPH_FEATURES)), keys,
                   np.array(times, dtype=np.float64), groups)


def collect_entry(subgraphs: Sequence[SubGraph], made, widths: Sequence[int],
                  heads: Sequence[int], keeps: Sequence[float], progress: bool = False
                  ) -> Samples:
    """Time the per-entry products on every sub-graph: the weighted aggregation at every
    (width, heads), the SDDMM at every (width, heads, kept fraction of its pairs); ``made``:
    :func:`~moagcn.host.devices.pair.entry_devices`."""
    from tqdm import tqdm
    check_widths(widths)
    keeps = check_keeps(keeps)
    runs = [("weighted", w, h, 1.0) for w in widths for h in heads] + \
        [("sddmm", w, h, k) for w in widths for h in heads for k in keeps]
    G, keys, times, groups, ops = [], [], [], [], []
    bar = tqdm(total=len(subgraphs) * len(runs) * len(made), desc="perfmodel GAT runs",
               unit="run", disable=not progress, file=sys.stderr)
    with bar:
        for sub in subgraphs:
            scored = {}         # devices pairing one SDDMM configuration time it once
            for op, w, h, k in runs:
                feats = graph_features(sub.graph, int(w), k, int(h))
                for key, dev in made:
                    same = scores_id(dev) if op == "sddmm" else None
                    if same is not None and (same, w, h, k) in scored:
                        t = scored[same, w, h, k]
                    else:
                        t = entry_op_time(dev, sub.graph, op, int(w), int(h), k)
                        if same is not None:
                            scored[same, w, h, k] = t
                    bar.update(1)
                    if not t > 0:
                        continue
                    G.append(feats)
                    keys.append(key)
                    times.append(t)
                    groups.append(sub.group or sub.name)
                    ops.append(op)
    return Samples(np.array(G, dtype=np.float64).reshape(-1, len(GRAPH_FEATURES)), keys,
                   np.array(times, dtype=np.float64), groups, ops)


def _split(groups: Sequence[str], test_fraction: float, seed: int) -> np.ndarray:
    """Boolean test mask: a seeded random ``test_fraction`` of the sub-graphs, all their runs."""
    names = np.array(sorted(set(groups)))
    if len(names) < 2:
        raise UserError("fitting needs at least two sub-graphs (one to fit, one to score); "
                        "give more --ratios or --seeds")
    rng = np.random.default_rng([seed, 7919])
    k = min(len(names) - 1, max(1, int(round(test_fraction * len(names)))))
    test_names = set(rng.choice(names, size=k, replace=False).tolist())
    return np.array([g in test_names for g in groups])


def score_regressors(samples: Samples, device_rows: Mapping[str, np.ndarray],
                     test: np.ndarray, regressors: Sequence[str], use_baseline: bool,
                     op: str = "sum") -> list[Score]:
    """Fit each regressor on the runs outside ``test`` and score it on those inside (the
    runs of one operation ``op``)."""
    G, y, keys = samples.graph, samples.time_s, np.asarray(samples.device)
    scores = []
    for name in regressors:
        m = _Fitted(name, REGRESSORS[name][1], use_baseline, device_rows, op)
        m.fit(G[~test], list(keys[~test]), y[~test])
        t0 = time.perf_counter()
        pred = m.predict(G[test], list(keys[test]))
        per = (time.perf_counter() - t0) / max(int(test.sum()), 1)
        err = pred - y[test]
        scores.append(Score(name, float(np.mean(err ** 2)), float(np.mean(np.abs(err))),
                            mape(pred, y[test]), per * 1e6))
    return scores


def fit(dataset: str | CSRGraph | Mapping[str, CSRGraph], devices: Sequence[AcceleratorChoice], *,
        ratios: Sequence[float] = PERF_RATIOS, widths: Sequence[int] = PERF_WIDTHS,
        seeds: int = PERF_SEEDS, seed: int = 0, device_kind: str = "model",
        test_fraction: float = PERF_TEST_FRACTION, regressors: Sequence[str] | None = None,
        baseline: bool = True, blocks: bool = True, progress: bool = False,
        name: str | None = None, keeps: Sequence[float] = PERF_KEEPS,
        ops: Sequence[str] = ("sum",), entry_widths: Sequence[int] = PERF_ENTRY_WIDTHS,
        heads: Sequence[int] = PERF_HEADS, sddmm_preset: str | None = None) -> PerfModel:
    """Sample sub-graphs of ``dataset``, time them on ``devices``, score the regressors on a
    held-out ``test_fraction`` of the sub-graphs, and return the model with the lowest MAPE
    (refitted on every run; its :attr:`PerfModel.report` holds the scores).

    ``dataset``: a name for :func:`load_graph` (several, comma-separated, are all sampled: a
    model fitted on more than one graph family generalises to other graphs), a graph
    (``name`` labels it) or a mapping of labels to graphs.
    ``device_kind``: ``model`` (cycle model) or ``rtl`` for the accelerators.
    ``baseline=False``: the regressors fit ``log(time)`` without the cost-term sum.
    ``blocks=False``: square sub-graphs only (see :func:`sample_subgraphs`).
    ``keeps``: the kept fractions of the output masks every run is also timed with (1: no
    mask; add a dropout's ``1 - p`` to predict masked training aggregations).
    ``ops``: ``sum`` and, for a GAT, the per-entry products ``weighted`` and ``sddmm``
    (:data:`OPS`): each accelerator (a weighted S-SpMM) is paired with its SDDMM (preset
    ``sddmm_preset``, :func:`~moagcn.host.devices.pair.scores_choice`) and both products are
    timed on every sub-graph at one head's ``entry_widths`` and ``heads`` (the SDDMM also
    under masks keeping ``keeps`` of its pairs); each product gets its own regressor, chosen
    on the same held-out sub-graphs.
    """
    ops = check_ops(ops)
    if any(int(h) < 1 for h in heads) or not len(heads):
        raise UserError(f"--heads-list {','.join(map(str, heads))}: give head counts >= 1")
    if not devices:
        raise UserError("--devices: give at least one device, e.g. sspmm:lanes=32,cpu")
    if not 0 < test_fraction < 1:
        raise UserError(f"--test-fraction {test_fraction}: use a fraction in (0, 1)")
    names = list(regressors) if regressors is not None else list(REGRESSORS)
    if not baseline and "cost_terms" in names:
        names.remove("cost_terms")     # without the baseline it would predict 1 s
    for r in names:
        make_regressor(r)         # unknown names fail before any run
    if isinstance(dataset, CSRGraph):
        graphs = {name or "graph": dataset}
    elif isinstance(dataset, Mapping):
        graphs = dict(dataset)
    else:
        datasets = [d.strip() for d in str(dataset).split(",") if d.strip()]
        if not datasets or len(set(datasets)) != len(datasets):
            raise UserError(f"--dataset {dataset!r}: give one dataset or several distinct ones "
                            "separated by commas, e.g. cora or rmat,powerlaw")
        graphs = {d: load_graph(d, seed=seed) for d in datasets}
    label = name or "+".join(graphs)
    t0 = time.perf_counter()
    subs = [sub for glabel, graph in graphs.items()
            for sub in sample_subgraphs(graph, ratios, seeds, seed, name=glabel, blocks=blocks)]
    made = entry_devices(devices, device_kind, sddmm_preset) if len(ops) > 1 else []
    parts = [collect(subs, widths, devices, device_kind, progress, keeps)]
    entry_s = 0.0
    if made:
        t1 = time.perf_counter()
        parts.append(collect_entry(subs, made, entry_widths, heads, keeps, progress))
        entry_s = time.perf_counter() - t1
    samples = Samples.concat(parts)
    sampling_s = time.perf_counter() - t0
    rows = {d.key: device_features(d) for d in devices}
    device_rows = {"sum": {k: np.array([v[f] for f in DEVICE_FEATURES])
                           for k, v in rows.items()}}
    device_rows["weighted"] = device_rows["sum"]
    scores_rows = {}
    if "sddmm" in ops:
        scores_rows = {d.key: scores_device_features(scores_choice(d, sddmm_preset))
                       for d in devices}
        device_rows["sddmm"] = {k: np.array([v[f] for f in SCORES_FEATURES])
                                for k, v in scores_rows.items()}
    test = _split(samples.group, test_fraction, seed)
    reports, chosen = {}, {}
    for op in ops:
        t1 = time.perf_counter()
        sel = np.array([o == op for o in samples.op], dtype=bool)
        sub_samples = samples.of(op)
        scores = score_regressors(sub_samples, device_rows[op], test[sel], names, baseline, op)
        best = min(scores, key=lambda s: s.mape)
        chosen[op] = best.regressor
        reports[op] = FitReport(scores, best.regressor, int((~test[sel]).sum()),
                                int(test[sel].sum()),
                                sampling_s - entry_s if op == "sum" else entry_s,
                                time.perf_counter() - t1)
    state = {
        "format": FORMAT, "version": FORMAT_VERSION, "dataset": label,
        "device_kind": device_kind, "baseline": baseline, "ops": ops,
        "devices": [{**d.describe(), "capability": rows[d.key]["capability"],
                     "features": rows[d.key],
                     **({"scores": {"design": scores_choice(d, sddmm_preset).design,
                                    "preset": scores_choice(d, sddmm_preset).preset,
                                    "features": scores_rows[d.key]}}
                        if d.key in scores_rows else {})} for d in devices],
        "sampling": {"ratios": [float(r) for r in ratios], "widths": [int(w) for w in widths],
                     "seeds": int(seeds), "seed": int(seed), "test_fraction": test_fraction,
                     "blocks": bool(blocks), "keeps": [float(k) for k in check_keeps(keeps)],
                     **({"entry_widths": [int(w) for w in entry_widths],
                         "heads": [int(h) for h in heads], "sddmm_preset": sddmm_preset}
                        if len(ops) > 1 else {})},
        "regressor": {"name": chosen["sum"], "params": REGRESSORS[chosen["sum"]][1]},
        "report": reports["sum"].as_dict(),
        "op_regressors": {op: {"name": chosen[op], "params": REGRESSORS[chosen[op]][1]}
                          for op in ops if op != "sum"},
        "op_reports": {op: reports[op].as_dict() for op in ops if op != "sum"},
        "samples": samples.as_dict(),
    }
    return PerfModel(state)


# -- held-out graphs -----------------------------------------------------------------------------

@dataclass
class HeldOut:
    """Predicted against measured seconds on graphs the model never saw."""

    rows: list[dict] = field(default_factory=list)

    def mape(self, graph: str | None = None, device: str | None = None,
             op: str | None = None) -> float:
        """MAPE (fraction) over the rows of one graph / device / operation, or all."""
        sel = [r for r in self.rows if (graph is None or r["graph"] == graph)
               and (device is None or r["device"] == device)
               and (op is None or r.get("op", "sum") == op)]
        return mape(np.array([r["predicted_s"] for r in sel]),
                    np.array([r["measured_s"] for r in sel]))

    @property
    def graphs(self) -> list[str]:
        return list(dict.fromkeys(r["graph"] for r in self.rows))


def held_out(model: PerfModel, graphs: Mapping[str, CSRGraph], widths: Sequence[int],
             device_kind: str = "model", devices: Sequence[AcceleratorChoice] | None = None,
             progress: bool = False, keeps: Sequence[float] = PERF_KEEPS,
             ops: Sequence[str] = ("sum",), entry_widths: Sequence[int] = PERF_ENTRY_WIDTHS,
             heads: Sequence[int] = PERF_HEADS) -> HeldOut:
    """Measure ``graphs`` at ``widths`` (and output masks keeping ``keeps``) on the model's
    devices (or ``devices``) and set the predictions beside the measurements; with the
    per-entry ``ops`` also those products at one head's ``entry_widths`` and ``heads`` (rows
    with ``op`` and ``heads``)."""
    ops = check_ops(ops)
    model.require_ops(ops)
    from tqdm import tqdm
    check_widths(widths)
    keeps = check_keeps(keeps)
    devs = list(devices) if devices is not None else list(model.devices.values())
    model.require(devs)
    made = [(d.key, d.on(device_kind).make()) for d in devs]
    out = HeldOut()
    steps = [(n, g, int(w), k) for n, g in graphs.items() for w in widths for k in keeps]
    for name, graph, width, keep in tqdm(steps, desc="held-out runs", unit="graph",
                                         disable=not progress, file=sys.stderr):
        feats = graph_features(graph, width, keep)
        keys = [k for k, _ in made]
        pred = model.predict_features(np.tile(feats, (len(keys), 1)), keys)
        for (key, dev), p in zip(made, pred):
            out.rows.append({"graph": name, "op": "sum", "width": width, "heads": 1,
                             "keep": keep, "device": key, "predicted_s": float(p),
                             "measured_s": aggregation_time(dev, graph, width, keep=keep)})
    if len(ops) > 1:
        pairs = entry_devices(devs, device_kind,
                              model.state["sampling"].get("sddmm_preset"))
        runs = [(op, w, h, k if op == "sddmm" else 1.0) for op in ops[1:]
                for w in entry_widths for h in heads
                for k in (keeps if op == "sddmm" else [1.0])]
        for name, graph in tqdm(graphs.items(), desc="held-out GAT runs", unit="graph",
                                disable=not progress, file=sys.stderr):
            for op, w, h, k in runs:
                for key, dev in pairs:
                    out.rows.append({
                        "graph": name, "op": op, "width": int(w), "heads": int(h),
                        "keep": k, "device": key,
                        "predicted_s": model.predict(graph, int(w), key, k, op, int(h)),
                        "measured_s": entry_op_time(dev, graph, op, int(w), int(h), k)})
    return out

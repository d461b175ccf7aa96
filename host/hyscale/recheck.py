"""The system model re-checked during training, and re-calibrated from the run's stage times.

The initial split (:func:`~moagcn.host.hyscale.split.model_split`) predicts, for every CPU share
of its grid and every batch size of an epoch, each trainer's stage times (sampling, loading,
transfer, training) and the iteration time. :class:`ModelTable` holds that table and
interpolates it linearly in the share (beyond the grid, from its end segments).
:class:`ModelCheck` then follows the run:

- every iteration, it predicts the iteration's time at the share and batch size that iteration
  ran with, from the model as it stood at the start of the epoch (nothing measured in the epoch
  enters its own prediction), and keeps the iteration's measured stage times -- the dict
  ``train_hybrid`` hands the DRM (``T_SC``, ``T_SA``, ``T_Load``, ``T_Tran``, ``T_TC``,
  ``T_TA``, and the groups' own iteration times ``G_C``, ``G_A``), so that the DRM and the
  model read the same measurements;
- at the end of every epoch, it compares the predicted epoch (the sum of its iterations'
  predictions) with the measured one (the sum of ``iteration_s``, the system's epoch);
- where the error exceeds ``threshold`` (:data:`RECALIBRATE_ABOVE`, 10 %) it re-calibrates
  from the last ``window`` measured iterations (:meth:`ModelCheck.recalibrate`), and the
  re-calibrated model's best share on the grid is handed to the DRM (``train_hybrid``:
  ``DRM.resplit``).

**The re-calibration** (stage factors, then the groups, then their spread). For every stage of
the DRM's dict, the measured sum over the window against the model's sum at the same shares and
batch sizes: a factor per stage and group -- sampling of the CPU group (``T_SC``) and of the
accelerator group (``T_SA``), loading (``T_Load``), transfer (``T_Tran``, also applied to the
CPU trainers' copies, which the dict does not carry), training of each group (``T_TC``,
``T_TA``). Each trainer's stages are the model's times these factors; its share of an iteration
is their maximum with prefetching (their sum without), a group's time ``G`` its slowest
trainer's. A factor per group then makes the window's mean ``G`` equal the measured one (what
the maximum of fluctuating stages adds, and what else the stages leave out). An iteration waits
for the slower group: its predicted time is the expected maximum of the two groups' times,
each normal with the spread measured over the window (the relative residuals of ``G_C`` and
``G_A`` against the re-calibrated model) and their correlation (Clark's formula,
:func:`expected_max2`), times a last factor that makes the window's iterations as predicted
sum to those measured (what the normal approximation leaves, e.g. a spread inflated by a
drifting load). A stage the model or the window has at zero keeps factor 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

#: an epoch predicted further than this from its measurement (relative error) re-calibrates
RECALIBRATE_ABOVE = 0.10
#: the measured iterations a re-calibration fits (the last ones; at least the last epoch's)
RECALIBRATE_WINDOW = 24
#: a re-calibrated model is trusted this far (in CPU share) from the shares it was fitted at:
#: the DRM's re-split is the best grid share within it
TRUST_RADIUS = 0.1
#: the re-split is taken where the re-calibrated model predicts the epoch at its best share at
#: least this much shorter than at the current one (the DRM's own moves settle the rest)
RESPLIT_GAIN = 0.05

STAGES = ("sample", "load", "transfer", "train")
#: the DRM's stage names and what each sums (``sum``) or takes the slowest of (``max``), per
#: group (``C``: the CPU group, ``A``: the accelerator group, ``*``: every trainer)
DRM_STAGES = {"T_SC": ("sample", "C", "sum"), "T_SA": ("sample", "A", "sum"),
              "T_Load": ("load", "*", "sum"), "T_Tran": ("transfer", "A", "sum"),
              "T_TC": ("train", "C", "max"), "T_TA": ("train", "A", "max")}


def expected_max2(mu1: float, s1: float, mu2: float, s2: float, rho: float = 0.0) -> float:
    """``E[max(X, Y)]`` of a bivariate normal (Clark, 1961): means ``mu1, mu2``, standard
    deviations ``s1, s2``, correlation ``rho``."""
    theta2 = s1 * s1 + s2 * s2 - 2.0 * rho * s1 * s2
    if theta2 <= 1e-30:
        return max(mu1, mu2)
    theta = math.sqrt(theta2)
    a = (mu1 - mu2) / theta
    cdf = 0.5 * (1.0 + math.erf(a / math.sqrt(2.0)))
    pdf = math.exp(-0.5 * a * a) / math.sqrt(2.0 * math.pi)
    return mu1 * cdf + mu2 * (1.0 - cdf) + theta * pdf


def _interp(x: float, xs: np.ndarray, ys: np.ndarray) -> float:
    """Linear in ``x`` through ``(xs, ys)``; beyond the ends, along the end segments; >= 0."""
    if xs.size == 1:
        return float(max(ys[0], 0.0))
    k = int(np.clip(np.searchsorted(xs, x) - 1, 0, xs.size - 2))
    t = (x - xs[k]) / (xs[k + 1] - xs[k])
    return float(max(ys[k] + t * (ys[k + 1] - ys[k]), 0.0))


class ModelTable:
    """The model's predictions on the share grid (``model_split``'s ``table``): per batch size,
    per share, the iteration time and every trainer's stage times."""

    def __init__(self, table: dict):
        self.kinds = list(table["kinds"])
        self.prefetch = bool(table["prefetch"])
        self.shares = np.asarray(table["shares"], dtype=np.float64)
        order = np.argsort(self.shares)
        self.shares = self.shares[order]
        self.batches = {}
        for b in table["batches"]:
            rows = [b["by_share"][k] for k in order]
            self.batches[int(b["batch"])] = {
                "count": int(b["count"]),
                "iteration_s": np.array([r["iteration_s"] for r in rows], dtype=np.float64),
                "stages": np.array([[[t[s] for s in STAGES] for t in r["trainers"]]
                                    for r in rows], dtype=np.float64)}
        if not self.batches:
            raise ValueError("ModelTable: the table has no batch sizes")
        n = len(self.kinds)
        for b, v in self.batches.items():
            if v["stages"].shape != (self.shares.size, n, len(STAGES)):
                raise ValueError(f"ModelTable: batch {b}: stages of shape "
                                 f"{v['stages'].shape}, expected ({self.shares.size}, {n}, 4)")

    def _entry(self, batch: int) -> dict:
        if batch in self.batches:
            return self.batches[batch]
        return self.batches[min(self.batches, key=lambda b: abs(b - batch))]

    def iteration_s(self, batch: int, share: float) -> float:
        """The calibrated model's iteration time at ``share`` (interpolated)."""
        return _interp(share, self.shares, self._entry(batch)["iteration_s"])

    def trainer_stages(self, batch: int, share: float) -> np.ndarray:
        """``[trainer, stage]`` seconds (stages in :data:`STAGES` order) at ``share``."""
        st = self._entry(batch)["stages"]
        out = np.empty(st.shape[1:])
        for i in range(st.shape[1]):
            for j in range(st.shape[2]):
                out[i, j] = _interp(share, self.shares, st[:, i, j])
        return out

    def epoch_batches(self) -> list:
        """``[(count, batch)]`` of one epoch."""
        return [(v["count"], b) for b, v in self.batches.items()]


@dataclass
class Correction:
    """A re-calibration: stage factors per group, the groups' factors and their spread."""

    stage: dict                       # {"C"|"A": {stage: factor}}
    group: dict                       # {"C"|"A": factor}
    cv: dict                          # {"C"|"A": relative spread}
    rho: float = 0.0
    iterations: int = 0
    #: the window's measured iterations over their predictions by the above (what the normal
    #: approximation of the two groups' maximum leaves)
    scale: float = 1.0
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"stage_factors": self.stage, "group_factors": self.group, "cv": self.cv,
                "rho": self.rho, "scale": self.scale, "iterations": self.iterations,
                **self.extra}


def _group_of(kind: str) -> str:
    return "A" if kind == "accel" else "C"


class ModelCheck:
    """The model's prediction re-checked against the run (see the module docstring).

    Call :meth:`observe` after every iteration (its batch size, the share it ran with, the
    DRM's stage dict and its measured ``iteration_s``; it returns the iteration's prediction)
    and :meth:`end_epoch` after the last iteration of every epoch (the epoch's record,
    re-calibrated where its error exceeds ``threshold``). ``skip``: iterations at the start of
    the run left out of every re-calibration (warm-up)."""

    def __init__(self, table: ModelTable, threshold: float = RECALIBRATE_ABOVE,
                 window: int = RECALIBRATE_WINDOW, skip: int = 1):
        if not threshold > 0:
            raise ValueError(f"ModelCheck: threshold {threshold} must be > 0")
        self.table = table
        self.kinds = table.kinds
        self.prefetch = table.prefetch
        self.threshold = float(threshold)
        self.window = max(1, int(window))
        self.skip = max(0, int(skip))
        self.correction: Correction | None = None
        self.seen: list[dict] = []            # every observed iteration
        self._epoch: list[dict] = []          # the current epoch's
        self.epochs: list[dict] = []

    # -- the model ---------------------------------------------------------------------------

    def groups(self, batch: int, share: float, c: Correction | None = None) -> dict:
        """Each group's time ``G`` at ``share`` from the trainers' stage times with ``c``'s
        stage factors (without ``c``: the model's own stages), before the group factors."""
        st = self.table.trainer_stages(batch, share)
        out = {}
        for i, kind in enumerate(self.kinds):
            g = _group_of(kind)
            k = (c.stage[g] if c is not None else {})
            s = {name: st[i, j] * k.get(name, 1.0) for j, name in enumerate(STAGES)}
            a = s["sample"] + s["load"]
            per = max(a, s["transfer"], s["train"]) if self.prefetch else \
                a + s["transfer"] + s["train"]
            out[g] = max(out.get(g, 0.0), per)
        return out

    def predict_iteration(self, batch: int, share: float) -> float:
        """The iteration time the model predicts now at ``share`` for a batch of ``batch``."""
        c = self.correction
        if c is None:
            return self.table.iteration_s(batch, share)
        return c.scale * self._max_of_groups(batch, share, c)

    def _max_of_groups(self, batch: int, share: float, c: Correction) -> float:
        G = self.groups(batch, share, c)
        mu = {g: G.get(g, 0.0) * c.group.get(g, 1.0) for g in ("C", "A")}
        return expected_max2(mu["C"], c.cv.get("C", 0.0) * mu["C"],
                             mu["A"], c.cv.get("A", 0.0) * mu["A"], c.rho)

    def predict_epoch(self, share: float) -> float:
        """An epoch at a fixed ``share``, as the model stands now."""
        return sum(n * self.predict_iteration(b, share) for n, b in self.table.epoch_batches())

    def best_share(self, near=None, radius: float = TRUST_RADIUS) -> float:
        """The grid's share with the shortest predicted epoch (the design-time mapping
        redone with the model as it stands now); with ``near`` (shares the model was fitted
        at), among the grid's shares within ``radius`` of one of them (the nearest grid share
        where none is)."""
        grid = [float(x) for x in self.table.shares]
        if near is not None and len(near):
            near = np.asarray(near, dtype=np.float64)
            dist = [float(np.min(np.abs(near - x))) for x in grid]
            grid = [x for x, d in zip(grid, dist) if d <= radius + 1e-9] or \
                [grid[int(np.argmin(dist))]]
        return float(min(grid, key=self.predict_epoch))

    # -- following the run -------------------------------------------------------------------

    def observe(self, batch: int, share: float, stage_s: dict, iteration_s: float) -> float:
        """One iteration's measurements (``stage_s``: the DRM's dict); returns the model's
        prediction of it."""
        pred = self.predict_iteration(batch, share)
        rec = {"batch": int(batch), "share": float(share), "stage_s": dict(stage_s),
               "iteration_s": float(iteration_s), "predicted_s": pred}
        self.seen.append(rec)
        self._epoch.append(rec)
        return pred

    def end_epoch(self, epoch: int, share: float | None = None) -> dict:
        """The epoch's predicted and measured times and the relative error; re-calibrated
        (``recalibrated``: True, with the new best share) where ``|error| > threshold``.
        ``share``: the split the next batches would get (the DRM's); ``resplit`` is True where
        the re-calibrated model predicts an epoch at ``best_share`` at least
        :data:`RESPLIT_GAIN` shorter than at ``share``."""
        its = self._epoch
        self._epoch = []
        predicted = sum(r["predicted_s"] for r in its)
        measured = sum(r["iteration_s"] for r in its)
        error = (predicted - measured) / measured if measured > 0 else float("nan")
        entry = {"epoch": int(epoch), "iterations": len(its), "predicted_s": predicted,
                 "measured_s": measured, "error": error,
                 "model": "calibrated" if self.correction is None else "re-calibrated",
                 "recalibrated": False, "resplit": False}
        if its and math.isfinite(error) and abs(error) > self.threshold:
            window = self.seen[self.skip:][-max(self.window, len(its)):] or its
            self.correction = self.recalibrate(window)
            best = self.best_share([r["share"] for r in window])
            entry.update(recalibrated=True, correction=self.correction.as_dict(),
                         best_share=best, predicted_epoch_at_best_s=self.predict_epoch(best))
            if share is not None:
                now = self.predict_epoch(share)
                entry.update(share=float(share), predicted_epoch_at_share_s=now,
                             resplit=bool(entry["predicted_epoch_at_best_s"]
                                          < (1.0 - RESPLIT_GAIN) * now))
        self.epochs.append(entry)
        return entry

    def recalibrate(self, window: list) -> Correction:
        """Factors from measured iterations ``window`` (as :meth:`observe` keeps them)."""
        kinds = self.kinds
        members = {"C": [i for i, k in enumerate(kinds) if _group_of(k) == "C"],
                   "A": [i for i, k in enumerate(kinds) if _group_of(k) == "A"], "*":
                   list(range(len(kinds)))}
        model_sum = {k: 0.0 for k in DRM_STAGES}
        meas_sum = {k: 0.0 for k in DRM_STAGES}
        for r in window:
            st = self.table.trainer_stages(r["batch"], r["share"])
            for name, (stage, grp, how) in DRM_STAGES.items():
                vals = [st[i, STAGES.index(stage)] for i in members[grp]]
                if vals:
                    model_sum[name] += sum(vals) if how == "sum" else max(vals)
                meas_sum[name] += float(r["stage_s"].get(name, 0.0))

        def factor(name):
            m, x = model_sum[name], meas_sum[name]
            return x / m if m > 0 and x > 0 else 1.0

        stage = {g: {"sample": factor(f"T_S{g}"), "load": factor("T_Load"),
                     "transfer": factor("T_Tran"), "train": factor(f"T_T{g}")}
                 for g in ("C", "A")}
        c = Correction(stage, {"C": 1.0, "A": 1.0}, {"C": 0.0, "A": 0.0}, 0.0, len(window))
        G = [self.groups(r["batch"], r["share"], c) for r in window]
        for g in ("C", "A"):
            m = sum(x.get(g, 0.0) for x in G)
            x = sum(float(r["stage_s"].get(f"G_{g}", 0.0)) for r in window)
            c.group[g] = x / m if m > 0 and x > 0 else 1.0
        resid = {}
        for g in ("C", "A"):
            u = [float(r["stage_s"].get(f"G_{g}", 0.0)) / (x[g] * c.group[g])
                 for r, x in zip(window, G) if x.get(g, 0.0) > 0]
            resid[g] = np.asarray(u, dtype=np.float64)
            c.cv[g] = float(resid[g].std()) if resid[g].size > 1 else 0.0
        a, b = resid["C"], resid["A"]
        if a.size == b.size and a.size > 2 and a.std() > 0 and b.std() > 0:
            c.rho = float(np.corrcoef(a, b)[0, 1])
        m = sum(self._max_of_groups(r["batch"], r["share"], c) for r in window)
        x = sum(r["iteration_s"] for r in window)
        c.scale = x / m if m > 0 and x > 0 else 1.0
        c.extra = {"measured_s": {k: meas_sum[k] / len(window) for k in DRM_STAGES},
                   "model_s": {k: model_sum[k] / len(window) for k in DRM_STAGES}}
        return c

    def report(self) -> dict:
        errs = [abs(e["error"]) for e in self.epochs if math.isfinite(e["error"])]
        return {"threshold": self.threshold, "window": self.window, "epochs": self.epochs,
                "recalibrations": sum(e["recalibrated"] for e in self.epochs),
                "max_abs_error": max(errs) if errs else None,
                "correction": None if self.correction is None else self.correction.as_dict()}

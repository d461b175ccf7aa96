"""Online correction of a fleet's work split from the device times it measures.

vGNN (seed 002, Sec. 4.4) partitions by its performance model, trains a few warm-up epochs,
and adjusts the partition from what it measured (there for BF16 devices). Here the same loop
serves every fleet and both starting points:

1. The run starts from the balance's shares (``vgnn``: the performance model's; ``spec``: the
   capability ratio) and trains ``warmup`` epochs on them. With ``probes`` (``vgnn``: the
   capability ratio's split and the equal one) each of those splits is trained ``warmup``
   epochs too, and the loop continues from the best one measured (its makespan: the largest
   device time).
2. The devices' times of those epochs are read (the median per device: cycles at each device's
   clock, or measured wall time for ``cpu``). Beside them, the predictor's times for the same
   split (the performance model on the blocks the runtime built; without a model, none).
3. Each device's time is corrected by its measured error, ``c_i = measured_i / predicted_i``,
   and the shares are solved again so that the *corrected* predictions ``c_i p_i(s)`` are
   equal (the fixed point ``s_i <- s_i / (c_i p_i(s))`` of :func:`moagcn.host.vgnn.fleet.work_shares`,
   from the current split). Without a predictor the time is taken as proportional to the share
   (``p_i(s) = measured_i s_i / current_i``), which gives ``s_i <- s_i / measured_i``.
4. The runtime re-partitions with the new shares and the loop goes back to 1, at most
   ``budget`` times. A window whose measured times are within ``tolerance`` of each other
   changes nothing (the loop keeps watching: the masks' densities drift as the weights train),
   nor does one whose solve leaves the shares where they are. A split whose measured makespan
   is worse than the best measured is not kept: the run goes back to the best split (and
   never proposes that split again). "Worse" allows for the measurement's noise (``noise``:
   :data:`WORSE` where a device's time is measured wall time; 0 where every time comes from
   cycles, which repeat exactly, so the run never ends on a split slower than one it
   measured). At most ``len(probes) + 2 budget`` re-partitions in all.

Every change is an :class:`Adjustment`: the epoch, the shares before and after, the measured
times, the model's times for the split measured and the corrected prediction for the new one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np

from moagcn.errors import UserError

#: re-partitions after the start (``--adjust``'s default for ``--balance vgnn``)
DEFAULT_BUDGET = 3
#: epochs trained on a split before its device times are read (``--warmup``)
DEFAULT_WARMUP = 1
#: measured times within this fraction of each other (largest / smallest - 1): balanced
TOLERANCE = 0.005
#: a split's makespan above the best measured one by more than this fraction is not kept
#: (measured wall times: ``ShareAdjuster.noise``; cycle-timed fleets use 0)
WORSE = 0.005
#: no device's share goes below this fraction of the equal share (a part must keep rows)
MIN_SHARE = 0.02
#: fixed-point steps of the corrected solve
ITERATIONS = 8


def check_budget(budget, option: str = "--adjust") -> int:
    """``budget`` as an int >= 1, or a :class:`UserError` naming the option and the range."""
    try:
        b = int(budget)
    except (TypeError, ValueError):
        raise UserError(f"{option} {budget!r}: the adjustment budget must be a whole number "
                        ">= 1 (re-partitions after warm-up)") from None
    if b != budget or b < 1:
        raise UserError(f"{option} {budget}: the adjustment budget must be a whole number >= 1 "
                        "(re-partitions after warm-up); use --no-adjust for a static split")
    return b


def check_warmup(warmup, option: str = "--warmup") -> int:
    """``warmup`` as an int >= 1, or a :class:`UserError`."""
    try:
        w = int(warmup)
    except (TypeError, ValueError):
        w = None
    if w is None or w != warmup or w < 1:
        raise UserError(f"{option} {warmup}: give the epochs trained on a split before its "
                        "device times are read, a whole number >= 1")
    return w


@dataclass
class Adjustment:
    """One re-partition: what was measured on the old split and why the new one."""

    epoch: int
    #: "probe" (a warm-up candidate), "correct" (the corrected solve), "select" (back to the
    #: best split measured) or "revert" (a correction measured worse: back to the best)
    reason: str
    shares_before: list
    shares_after: list
    #: per device, the median of the warm-up epochs of the split the move starts from (a
    #: correction starts from the best split measured, which may be an earlier one)
    measured_s: list
    predicted_s: list | None          # the predictor's times for that split (None: none)
    corrected_s: list | None          # the corrected prediction for shares_after
    makespan_s: float                 # max(measured_s)

    def as_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        def ms(v):
            return "-" if v is None else "/".join(f"{1e3 * x:.3f}" for x in v)
        fr = "/".join(f"{x:.3f}" for x in self.shares_before)
        to = "/".join(f"{x:.3f}" for x in self.shares_after)
        return (f"epoch {self.epoch + 1}: shares {fr} -> {to} ({self.reason}); measured ms "
                f"{ms(self.measured_s)}, predicted ms {ms(self.predicted_s)}, corrected "
                f"prediction for the new split ms {ms(self.corrected_s)}")


#: a probe or move to the runtime's own equal split (``--balance uniform``'s: no shares)
EQUAL = "equal"


@dataclass
class ShareAdjuster:
    """The loop of the module docstring. ``predict(shares)`` -> each device's predicted seconds
    for a split (the blocks the runtime builds for it; ``shares`` None: the runtime's equal
    split), or None (time taken as proportional to the share); ``probes``: other splits
    measured once during warm-up (arrays, or :data:`EQUAL` for the runtime's equal split).
    Call :meth:`observe` after every epoch with the devices' measured seconds; it returns the
    split to re-partition to (shares, or :data:`EQUAL`), or None."""

    shares: object
    predict: Callable | None = None
    budget: int = DEFAULT_BUDGET
    warmup: int = DEFAULT_WARMUP
    tolerance: float = TOLERANCE
    probes: list = field(default_factory=list)
    #: a correction measured more than this fraction slower than the best split is reverted
    noise: float = WORSE
    log: list = field(default_factory=list)
    done: bool = False
    used: int = 0
    best: tuple | None = None             # (makespan, split, measured) of the best split
    _window: list = field(default_factory=list)
    _cache: dict = field(default_factory=dict)
    _correcting: bool = False             # the current split came from a correction
    _failed: set = field(default_factory=set)  # corrections measured worse than the best

    def __post_init__(self):
        self.budget = check_budget(self.budget)
        self.warmup = check_warmup(self.warmup)
        self.shares = self._split(self.shares)
        seen = {_key(self.shares)}
        probes = []
        for q in self.probes:
            q = self._split(q)
            if _key(q) not in seen:
                seen.add(_key(q))
                probes.append(q)
        self.probes = probes

    def _split(self, q):
        if q is None or (isinstance(q, str) and q == EQUAL):
            return EQUAL
        return _normalise(q)

    def _arr(self, split, m: int) -> np.ndarray:
        return np.full(m, 1.0 / m) if isinstance(split, str) else split

    def predicted(self, split=None) -> np.ndarray | None:
        """The predictor's times for ``split`` (default: the current one), cached."""
        if self.predict is None:
            return None
        split = self.shares if split is None else split
        key = _key(split)
        if key not in self._cache:
            arg = None if isinstance(split, str) else np.array(split)
            self._cache[key] = np.asarray(self.predict(arg), dtype=np.float64)
        return self._cache[key]

    def observe(self, epoch: int, measured):
        t = np.asarray(measured, dtype=np.float64)
        m = t.size
        if not isinstance(self.shares, str) and t.shape != self.shares.shape:
            raise UserError(f"{t.size} device times for {self.shares.size} workers")
        if self.done:
            return None
        self._window.append(t)
        if len(self._window) < self.warmup:
            return None
        t = np.median(np.array(self._window), axis=0)
        self._window = []                       # the next window starts now
        span = float(t.max())
        here = self.best is not None and _key(self.best[1]) == _key(self.shares)
        if self._correcting:
            if span > self.best[0] * (1 + self.noise):
                self._failed.add(_key(self.shares))   # worse: go back, never try it again
                return self._move(epoch, "revert", self.best[1], t)
            self.best = (span, self.shares, t)
        elif self.best is None or span <= self.best[0] or here:
            self.best = (span, self.shares, t)
        self._correcting = False
        if self.probes:                         # warm-up: measure the next candidate split
            return self._move(epoch, "probe", self.probes.pop(0), t)
        span, base, tb = self.best
        here = _key(base) == _key(self.shares)
        stay = None if here else self._move(epoch, "select", base, t)
        if not np.all(tb > 0) or self.used >= self.budget:
            self.done = True
            return stay
        if tb.max() / tb.min() - 1 <= self.tolerance:
            return stay                         # balanced: keep watching (masks drift)
        cur = self._arr(base, m)
        pred = self.predicted(base)
        if pred is not None and np.all(pred > 0):
            c = tb / pred
            p = self.predict

            def corrected(s):
                return c * np.maximum(np.asarray(p(np.asarray(s)), dtype=np.float64), 1e-15)
        else:
            rate = tb.copy()

            def corrected(s):
                return rate * s / cur
        new = cur.copy()
        for _ in range(ITERATIONS):
            new = _normalise(new / corrected(new))
        if np.max(np.abs(new - cur)) < 1e-3 or any(
                np.max(np.abs(new - np.array(f))) < 1e-3 for f in self._failed
                if f != (EQUAL,)):
            return stay                         # nothing to gain, or tried and worse
        if not here:
            self.log.pop()                      # straight from the best split to the new one
        self.used += 1
        return self._move(epoch, "correct", new, t, base, tb, pred, corrected(new))

    def _move(self, epoch, reason, new, t, base=None, tb=None, pred=None, corr=None):
        base = self.shares if base is None else base
        tb = t if tb is None else tb
        if pred is None:
            pred = self.predicted(base)
        m = tb.size
        self.log.append(Adjustment(epoch, reason, _floats(self._arr(self.shares, m)),
                                   _floats(self._arr(new, m)), _floats(tb),
                                   None if pred is None else _floats(pred),
                                   None if corr is None else _floats(corr), float(tb.max())))
        self._correcting = reason == "correct"
        self.shares = new if isinstance(new, str) else np.asarray(new, np.float64).copy()
        self._window = []
        return EQUAL if isinstance(new, str) else self.shares.copy()


def _key(split) -> tuple:
    if isinstance(split, str):
        return (split,)
    return tuple(round(float(x), 12) for x in split)


def _normalise(shares) -> np.ndarray:
    s = np.asarray(shares, dtype=np.float64)
    if s.ndim != 1 or s.size == 0 or not np.all(np.isfinite(s)) or np.any(s < 0) \
            or s.sum() <= 0:
        raise UserError(f"work shares {list(np.atleast_1d(shares))} must be finite, "
                        "non-negative and not all zero")
    s = s / s.sum()
    floor = MIN_SHARE / s.size
    if np.any(s < floor):
        s = np.maximum(s, floor)
        s /= s.sum()
    return s


def _floats(v) -> list:
    return [float(x) for x in v]

"""HyScale-GNN as a training system (seed 003, Sec. III-IV): hybrid trainers, synchronous SGD,
two-stage prefetching and the Dynamic Resource Manager (Alg. 1).

Every iteration one mini-batch of ``batch`` training nodes is split between the trainers: the
CPU trainers' group gets the CPU share of it, the accelerator trainers' group the rest, each
group's part cut evenly among its trainers. The first share is given, equal per trainer, or
(``cpu_share="model"``, the command's default) the performance model's best on this machine
(:func:`resolve_split`); the DRM moves it from there. Stage A's processes run on cores of
their own where there are enough (``pin_cores``). Each trainer has its own two-stage
:class:`~moagcn.host.hyscale.minibatch.Prefetcher` (sampling, the blocks' aggregation operators and
feature loading of iteration ``i + 2`` -- stage A, by default in a pool of forked processes
that all trainers share (``stage_a``, ``sampler_threads``), so that it shares no interpreter
lock with the trainers -- and the transfer of
``i + 1``; one prefetcher for the whole run, so the pipeline does not drain between epochs), a
replica of the model, and a sparse device:

- ``cpu`` trainers aggregate with torch on the CPU;
- ``accel`` trainers aggregate on an accelerator (``--device model|rtl``, ``--design``,
  ``--param``), forward and backward (:func:`~moagcn.host.nn.autograd.aggregate`); on a design
  with a dense datapath (``--design hyscale``: the systolic array) their dense layers run
  there too, the update and both of its backward products
  (:func:`~moagcn.host.nn.autograd.linears_on_device`; ``update_on="host"``: torch), so the
  whole training step is the accelerator's; on the S-SpMM they run in torch on the host;
- ``gpu`` trainers are ``cpu`` trainers whose torch work runs on CUDA (refused without a CUDA
  GPU: no trainer silently runs elsewhere than asked).

The trainers run one after another, each timed alone (``concurrent=True``: at the same time, in
threads; :func:`train_hybrid_distributed`: one torch.distributed process each, gradients
all-reduced), and the iteration takes the slowest, as separate hardware would; the synchronizer
sums their gradients (each trainer's
loss is its sub-batch's summed cross-entropy over the whole batch size, so the sum is the
full-batch mean gradient), steps the optimizer once and copies the weights back to every
replica: synchronous SGD.

**Stage times.** Per iteration: ``T_SC`` / ``T_SA`` sampling of the CPU / accelerator groups'
sub-batches, ``T_Load`` feature loading, ``T_Tran`` the accelerator group's transfer, ``T_TC``
the slowest CPU trainer, ``T_TA`` the slowest accelerator trainer -- its time is the
accelerator's time (the cycles of its aggregations, and of its updates where they run on
it, at its clock) plus its measured host time outside them (host updates, loss). With
prefetching the iteration time is the pipeline's slowest stage over all trainers (sampling +
loading, transfer, training: the prefetchers hide the first two as long as they keep up);
without, the slowest trainer's sum of them. The throughput is ``batch / iteration time``
(targets per second) and, as the paper's Eq. 5, sampled edges per second.

**DRM (Alg. 1).** After every iteration the engine (on a moving average of the stage times)
sorts ``T_SC, T_SA, T_Load, T_TC, T_Accel =
max(T_Tran, T_TA)``, takes the bottleneck and the fastest, and either *balances work* (moves
mini-batch share between the CPU and accelerator groups, damped by half a step; the batch size
stays the same; a decision after iteration ``i`` splits the batches from ``i + depth + 1`` on,
the ones stage A has not sampled yet, so that every process cuts every batch alike) or
*balances threads* (moves one thread from
the fastest CPU task to the bottleneck among the stage-A sampler/loader workers and the CPU
trainers' torch threads; takes effect at the next epoch, where the prefetchers are made
again for the rest of the run).
Where Alg. 1 asks for balance-thread but no task has a thread to give (one thread each, as on a
2-core machine), the engine balances work between the two groups instead, so a CPU-bound bad
split can still be left. Every decision is logged in the report.

*What a work balance weighs* (our extension; :meth:`DRM.balance_trainers`): not the two stage
times Alg. 1 names but each group's own iteration time (``G_C``, ``G_A``: its slowest
trainer's pipeline, sampling and loading included, which is what the synchronous iteration
waits for here, where each trainer's stages overlap one another). Until iterations at two
shares have been seen, the shares move so those times meet if each were proportional to its
share; after that, both are fitted as affine in the share (a step has fixed costs) with their
spread, and the share moves towards the least *expected maximum* of the two -- a group whose
time fluctuates more (wall-clock torch on shared cores) is kept further from critical.

One module: :func:`train_hybrid`'s loop, the DRM engine it drives and the splitting of its
batches among trainers share the run's state (shares, stage times, the prefetcher).
"""

from __future__ import annotations

import dataclasses
import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Sequence

import numpy as np
import torch

from moagcn.errors import UserError
from moagcn.host.devices.select import AcceleratorChoice
from moagcn.host.graphs.data import Dataset
from moagcn.host.graphs.minibatch import NeighborSampler, check_fanouts, training_ids
from moagcn.host.graphs.ops import row_normalize
from moagcn.host.graphs.sampling import parse_fanout
from moagcn.host.hyscale.minibatch import Prefetcher
from moagcn.host.hyscale.recheck import RECALIBRATE_ABOVE, ModelCheck, ModelTable
from moagcn.host.hyscale.split import model_split
from moagcn.host.hyscale.stage_a import FeatureLoader, StageAProcesses, can_fork
from moagcn.host.hyscale.trainers import BlockOperators, Trainer, batch_sizes, epoch_batches
from moagcn.host.nn.layerwise import layer_graphs, layerwise_forward
from moagcn.host.nn.models import GNN
from moagcn.host.parallel.launch import launch

TRAINER_KINDS = ("cpu", "accel", "gpu")


def parse_trainers(text: str) -> list[str]:
    """``cpu:2,accel:1`` -> ``["cpu", "cpu", "accel"]`` (``kind`` alone means one)."""
    out = []
    for item in str(text).split(","):
        item = item.strip()
        kind, _, count = item.partition(":")
        if kind not in TRAINER_KINDS:
            raise UserError(f"--trainers {text!r}: {item!r} names no trainer kind; use "
                            f"{', '.join(TRAINER_KINDS)} with a count, e.g. cpu:2,accel:1")
        try:
            n = int(count) if count else 1
        except ValueError:
            raise UserError(f"--trainers {text!r}: the count in {item!r} is not a whole "
                            "number") from None
        if n < 1:
            raise UserError(f"--trainers {text!r}: {item!r} asks for {n} trainers; use 1 or "
                            "more, or leave the kind out")
        out += [kind] * n
    if not out:
        raise UserError("--trainers is empty; give e.g. cpu:1,accel:1")
    return out


@dataclass
class HybridConfig:
    """One hybrid training run (defaults: GraphSAGE 2 x 128 with GraphSAGE's fanouts: 25
    neighbours at the hop next to the targets, 10 at the next -- ``10,25`` here, where the
    input layer comes first)."""

    model: str = "sage"
    hidden: int = 128
    fanouts: str = "10,25"
    batch: int = 1024
    trainers: str = "cpu:1,accel:1"
    device: str = "model"
    design: str = "sspmm"
    preset: str | None = None
    params: dict = field(default_factory=dict)
    epochs: int = 5
    lr: float = 0.005
    weight_decay: float = 5e-4
    dropout: float = 0.5
    seed: int = 0
    #: the CPU group's share of each batch at the start: a share in (0, 1), ``"model"`` (the
    #: performance model's best on this machine: :func:`resolve_split`) or None (equal per
    #: trainer)
    cpu_share: float | str | None = None
    drm: bool = True
    prefetch: bool = True
    #: batches stage A and B run ahead of the training; 0: none (stage A of every trainer in
    #: the stage-A pool at once, then the copies and the training: the baseline without
    #: prefetching that has the same stage-A workers)
    depth: int = 2
    #: stage-A (sample + load) workers: the processes of the pool the trainers share
    #: (``stage_a="process"``) or threads per trainer; and torch threads of the CPU trainers
    sampler_threads: int = 1
    trainer_threads: int = 1
    #: where the prefetchers' stage A (sampling + loading) runs: ``process`` (one pool of
    #: ``sampler_threads`` forked processes that every trainer's prefetcher queues its batches
    #: on, like the paper's pool of sampler threads: no interpreter lock shared with the
    #: trainers; Linux) or ``thread`` (``sampler_threads`` threads per trainer)
    stage_a: str = field(default_factory=lambda: "process" if can_fork() else "thread")
    #: with stage A in processes in one process (not ``--distributed``): each stage-A process
    #: on a core of its own and the trainers on the others, where there are more cores than
    #: stage-A processes (:class:`StageAProcesses`' ``pin``), as the paper binds its threads
    pin_cores: bool = True
    normalize_features: bool = True
    #: run the trainers at the same time (threads); by default one after another, each timed
    #: alone, the iteration taking the slowest (the trainers' hardware is separate; on a
    #: 2-core host, concurrent trainers mostly measure each other)
    concurrent: bool = False
    #: where an accelerator trainer's dense layers (the update and its two backward products)
    #: run: ``device`` on a design with a dense datapath (HyScale's systolic array; the S-SpMM
    #: has none, so its trainers update on the host), or ``host`` (torch)
    update_on: str = "device"
    #: with the initial split from the performance model: re-check its prediction every epoch
    #: against the measured stage times, re-calibrate it where an epoch's relative error
    #: exceeds ``recheck_threshold`` (``inf``: report the prediction, never re-calibrate) and
    #: let the DRM re-split from it (:mod:`~moagcn.host.hyscale.recheck`)
    recheck: bool = True
    recheck_threshold: float = RECALIBRATE_ABOVE

    def kinds(self) -> list[str]:
        return parse_trainers(self.trainers)

    def fanout_list(self) -> list:
        parts = [p for p in str(self.fanouts).split(",") if p.strip()]
        if not parts:
            raise UserError(f"--fanout {self.fanouts!r} is empty; give one fanout per layer, "
                            "input layer first, e.g. --fanout 10,25 ('all' for every neighbour)")
        return check_fanouts(parse_fanout(self.fanouts, max(1, len(parts))))

    def validate(self, dataset: Dataset | None = None) -> "HybridConfig":
        kinds = self.kinds()
        self.fanout_list()
        if self.model not in ("gcn", "sage"):
            raise UserError(f"--model {self.model!r}: HyScale training runs gcn or sage")
        if self.batch < len(kinds):
            raise UserError(f"--batch {self.batch} is smaller than the {len(kinds)} trainers; "
                            "give every trainer at least one node")
        if isinstance(self.cpu_share, str):
            if self.cpu_share != "model":
                raise UserError(f"--cpu-share {self.cpu_share!r}: give a share in (0, 1) or "
                                "'model' (the performance model's split)")
        elif self.cpu_share is not None and not 0.0 < self.cpu_share < 1.0:
            raise UserError(f"--cpu-share {self.cpu_share}: must be in (0, 1)")
        if self.epochs < 1 or self.hidden < 1:
            raise UserError("--epochs and --hidden must be at least 1")
        if self.stage_a not in ("process", "thread"):
            raise UserError(f"--stage-a {self.stage_a!r}: choose process or thread")
        if self.stage_a == "process" and self.prefetch and not can_fork():
            raise UserError("--stage-a process forks the samplers, which this platform cannot; "
                            "use --stage-a thread")
        if not (isinstance(self.recheck_threshold, (int, float))
                and self.recheck_threshold > 0):
            raise UserError(f"--recheck-threshold {self.recheck_threshold}: give a relative "
                            "error above 0, e.g. 0.1 (inf: report, never re-calibrate)")
        if self.update_on not in ("device", "host"):
            raise UserError(f"update_on = {self.update_on!r}: choose device or host")
        if self.device not in ("model", "rtl"):
            raise UserError(f"--device {self.device!r}: accelerator trainers run on model or "
                            "rtl")
        if "accel" in kinds:
            AcceleratorChoice(self.device, self.design, self.preset, dict(self.params)).config()
        if "gpu" in kinds and not torch.cuda.is_available():
            raise UserError(f"--trainers {self.trainers}: a gpu trainer runs torch on CUDA, and "
                            "torch sees no CUDA GPU here; use cpu:K for torch on the host")
        if dataset is not None:
            ids = training_ids(dataset.train_mask, labels=dataset.labels)
            if self.batch > ids.size:
                raise UserError(f"--batch {self.batch} is larger than the {ids.size} training "
                                f"nodes of {dataset.name}; use at most {ids.size}")
        return self


class _RunBatches(Sequence):
    """Every epoch's batches (:func:`epoch_batches`) one after another, made an epoch at a time
    when first asked for (the last two kept): a run-long prefetcher indexes them without the
    whole run's permutations in memory. :meth:`position` is batch ``i``'s ``(epoch, index)``."""

    def __init__(self, train_ids, batch: int, seed: int, epochs: int, trainers: int):
        self.args = (train_ids, batch, seed)
        self.trainers, self.epochs = trainers, epochs
        self.per_epoch = sum(c for c, _ in batch_sizes(len(train_ids), batch, trainers))
        self._made: dict[int, list] = {}

    def __len__(self):
        return self.epochs * self.per_epoch

    def position(self, i: int) -> tuple[int, int]:
        return divmod(i, self.per_epoch)

    def __getitem__(self, i):
        e, j = self.position(i)
        if e not in self._made:
            train_ids, batch, seed = self.args
            self._made = {k: v for k, v in self._made.items() if k == e - 1}
            self._made[e] = epoch_batches(train_ids, batch, seed, e, self.trainers)
        return self._made[e][j]


class _Tail(Sequence):
    """``items[first:]`` without a copy."""

    def __init__(self, items: Sequence, first: int):
        self.items, self.first = items, first

    def __len__(self):
        return len(self.items) - self.first

    def __getitem__(self, i):
        return self.items[self.first + i]


class _Splitter:
    """The split of every iteration's batch between the trainers: ``share_of(kind, i)`` gives
    each trainer's weight for batch ``i`` (cached on first use)."""

    def __init__(self, batches: list[np.ndarray], kinds: list[str], share_of):
        self.batches, self.kinds, self.share_of = batches, kinds, share_of
        self._cache: dict[int, list[np.ndarray]] = {}

    def parts(self, i: int) -> list[np.ndarray]:
        if i not in self._cache:
            # the trainers' prefetchers ask for batch i within their look-ahead of each other:
            # older splits are not asked for again
            for k in [k for k in self._cache if k < i - 64]:
                del self._cache[k]
            b = self.batches[i]
            w = np.array([self.share_of(k, i) for k in self.kinds], dtype=np.float64)
            sizes = np.maximum(1, np.floor(w / w.sum() * b.size).astype(np.int64))
            sizes[int(np.argmax(w))] += b.size - int(sizes.sum())
            cuts = np.r_[0, np.cumsum(sizes)]
            self._cache[i] = [b[cuts[t]:cuts[t + 1]] for t in range(len(self.kinds))]
        return self._cache[i]

    def view(self, t: int) -> "_View":
        return _View(self, t)


class _View(Sequence):
    def __init__(self, splitter: _Splitter, t: int):
        self.splitter, self.t = splitter, t

    def __len__(self):
        return len(self.splitter.batches)

    def __getitem__(self, i):
        return self.splitter.parts(i)[self.t]


class DRM:
    """HyScale-GNN's Dynamic Resource Manager (Alg. 1) over the CPU and accelerator groups."""

    def __init__(self, cpu_share: float, threads: dict, enabled: bool = True,
                 damping: float = 0.5, smoothing: float = 0.5):
        self.cpu_share = float(cpu_share)
        #: stage times are an exponential moving average (weight ``smoothing`` on the newest
        #: iteration), reset when the work moves: one noisy iteration on a shared machine
        #: should not swing the split
        self.smoothing = smoothing
        self._avg: dict | None = None
        self.threads = dict(threads)        # {"sampler": n, "trainer": n}
        self.enabled = enabled
        self.damping = damping
        self.log: list[dict] = []
        #: (share used, T_TC, T_Accel) of every iteration since the threads last moved: what
        #: :meth:`balance_trainers` fits
        self.samples: list[tuple] = []

    def balance_work(self, t_cpu: float, t_acc: float) -> None:
        """Move share so both groups' times meet, if each group's time is linear in its share;
        half a step (damping) at a time."""
        s = self.cpu_share
        if t_cpu <= 0 or t_acc <= 0:
            return
        target = (s / t_cpu) / (s / t_cpu + (1 - s) / t_acc)
        self.cpu_share = float(np.clip(s + self.damping * (target - s), 0.02, 0.98))

    @staticmethod
    def _groups(T: dict, pair: tuple) -> tuple:
        """The two groups' times that a work balance weighs: their own iteration times
        (``G_C``, ``G_A``: each group's slowest trainer pipeline, sampling and loading
        included) where the engine was given them, else the stage pair Alg. 1 names."""
        if T.get("G_C", 0.0) > 0 and T.get("G_A", 0.0) > 0:
            return T["G_C"], T["G_A"]
        return T.get(pair[0], 0.0), T.get(pair[1], 0.0)

    def balance_trainers(self, t_cpu: float, t_acc: float) -> str:
        """Balance work between the CPU and accelerator groups (our extension of Alg. 1's
        balance-work; ``t_cpu`` / ``t_acc`` their current times): once iterations at two or
        more shares have been seen, fit each group's time (:attr:`samples`) as affine in its
        share (``a + b x share``: a trainer step has fixed costs) with
        its spread (the residuals' standard deviation; a slope not above twice its standard
        error falls back to the means), and move towards the share that
        minimises the expected *maximum* of the two times -- what a synchronous iteration
        waits for -- rather than the one where their means meet: a group whose time
        fluctuates more is kept further from critical. Before that, :meth:`balance_work`.
        Returns which of the two was used."""
        from scipy.special import ndtr
        pts = np.asarray(self.samples, dtype=np.float64)
        if pts.shape[0] < 3 or np.unique(np.round(pts[:, 0], 3)).size < 2:
            self.balance_work(t_cpu, t_acc)
            return "means"
        share = pts[:, 0]
        fits = []
        for x, y in ((share, pts[:, 1]), (1.0 - share, pts[:, 2])):
            A = np.stack([np.ones_like(x), x], 1)
            (a, b), *_ = np.linalg.lstsq(A, y, rcond=None)
            resid = y - (a + b * x)
            spread = float(np.sqrt(np.mean(resid ** 2)))
            # a group's time grows with its share; a slope the samples cannot tell from zero
            # (noise over a narrow range of shares) would make that group look free of work
            # and push the split to the end where it takes everything: then balance the means
            slope_error = spread / max(float(np.sqrt(np.sum((x - x.mean()) ** 2))), 1e-12)
            if not b > 2.0 * slope_error:
                self.balance_work(t_cpu, t_acc)
                return "means; fit without a clear slope"
            fits.append((a, b, spread))
        (ac, bc, sc), (aa, ba, sa) = fits
        grid = np.linspace(0.02, 0.98, 97)
        mu_c, mu_a = ac + bc * grid, aa + ba * (1.0 - grid)
        theta = max(np.hypot(sc, sa), 1e-12)
        alpha = (mu_c - mu_a) / theta
        cdf, pdf = ndtr(alpha), np.exp(-0.5 * alpha ** 2) / math.sqrt(2.0 * math.pi)
        expected_max = mu_c * cdf + mu_a * (1.0 - cdf) + theta * pdf
        target = float(grid[int(np.argmin(expected_max))])
        s = self.cpu_share
        self.cpu_share = float(np.clip(s + self.damping * (target - s), 0.02, 0.98))
        return "expected max"

    def balance_thread(self, fastest: str, bottleneck: str) -> str:
        knob = {"T_SC": "sampler", "T_SA": "sampler", "T_Load": "sampler", "T_TC": "trainer"}
        give, take = knob.get(fastest), knob.get(bottleneck)
        if give is None or take is None or give == take or self.threads[give] <= 1:
            return "none"
        self.threads[give] -= 1
        self.threads[take] += 1
        return f"{give} -> {take}"

    def _thread_or_work(self, fastest, bottleneck, t_cpu, t_acc, names) -> str:
        """Alg. 1's balance-thread; when there is no thread to move (every CPU task down to one
        thread, as on a 2-core machine) balance work instead -- our extension, or the engine
        could never leave a bad split whose bottleneck is a CPU task."""
        moved = self.balance_thread(fastest, bottleneck)
        if moved != "none":
            self.samples = []             # the trainers' times change with their threads
            return "balance_thread " + moved
        how = self.balance_trainers(t_cpu, t_acc)
        return f"balance_work({names}) (no thread to move; {how})"

    def resplit(self, iteration: int, share: float, why: str) -> dict:
        """Move the split to ``share`` (the re-calibrated system model's best, as the
        initial split is the calibrated model's): the batches not sampled yet are cut there
        and Alg. 1 goes on from it. Logged as a decision after ``iteration``; nothing moves
        while the engine is off."""
        before = self.cpu_share
        if self.enabled:
            self.cpu_share = float(np.clip(share, 0.02, 0.98))
        if self.cpu_share != before:
            self._avg = None              # the times were measured at the old split
        entry = {"iteration": iteration, "action": f"resplit ({why})" if self.enabled else
                 f"none (DRM off; {why})", "cpu_share_before": before,
                 "cpu_share": self.cpu_share, "threads": dict(self.threads)}
        self.log.append(entry)
        return entry

    def update(self, iteration: int, T: dict, has_cpu: bool, has_acc: bool,
               share_used: float | None = None) -> dict:
        """One step of Alg. 1 on the stage times ``T`` of an iteration that ran with the CPU
        share ``share_used`` (default: the current one); returns the logged decision."""
        T = dict(T, T_Accel=max(T.get("T_Tran", 0.0), T.get("T_TA", 0.0)))
        g_cpu, g_acc = self._groups(T, ("T_TC", "T_Accel"))
        if has_cpu and has_acc and g_cpu > 0 and g_acc > 0:
            self.samples.append((self.cpu_share if share_used is None else float(share_used),
                                 float(g_cpu), float(g_acc)))
        if self._avg is None:
            self._avg = dict(T)
        else:
            a = self.smoothing
            self._avg = {k: a * T[k] + (1 - a) * self._avg.get(k, T[k]) for k in T}
        T = dict(self._avg)
        T["T_Accel"] = max(T.get("T_Tran", 0.0), T.get("T_TA", 0.0))
        names = ["T_SC", "T_SA", "T_Load", "T_TC", "T_Accel"]
        order = sorted(names, key=lambda k: -T.get(k, 0.0))
        bottleneck, second, fastest = order[0], order[3], order[4]
        fastest_cpu = min(["T_SC", "T_Load", "T_TC"], key=lambda k: T.get(k, 0.0))
        action = "none"
        before = self.cpu_share
        if self.enabled and has_cpu and has_acc:
            sampling = self._groups(T, ("T_SC", "T_SA"))
            training = self._groups(T, ("T_TC", "T_Accel"))
            if bottleneck == "T_SA":
                how = self.balance_trainers(*sampling)
                action = f"balance_work(T_SC, T_SA) ({how})"
            elif bottleneck == "T_Accel":
                how = self.balance_trainers(*training)
                action = f"balance_work(T_TC, T_Accel) ({how})"
            elif bottleneck == "T_Load":
                action = "balance_thread " + self.balance_thread(fastest_cpu, bottleneck)
            elif bottleneck == "T_SC":
                if fastest == "T_SA" or (fastest == "T_Accel" and second == "T_SA"):
                    how = self.balance_trainers(*sampling)
                    action = f"balance_work(T_SC, T_SA) ({how})"
                else:
                    action = self._thread_or_work(fastest, bottleneck, *sampling, "T_SC, T_SA")
            elif bottleneck == "T_TC":
                if fastest == "T_Accel" or (fastest == "T_SA" and second == "T_Accel"):
                    how = self.balance_trainers(*training)
                    action = f"balance_work(T_TC, T_Accel) ({how})"
                else:
                    action = self._thread_or_work(fastest, bottleneck, *training,
                                                  "T_TC, T_Accel")
        if self.cpu_share != before:
            self._avg = None              # the times were measured at the old split
        entry = {"iteration": iteration, "bottleneck": bottleneck, "fastest": fastest,
                 "action": action, "cpu_share_before": before, "cpu_share": self.cpu_share,
                 "threads": dict(self.threads), "stage_s": {k: T.get(k, 0.0) for k in names}}
        self.log.append(entry)
        return entry


def _stage_times(kinds: list[str], results: list[dict], times: list[dict],
                 prefetch: bool = True) -> dict:
    """Alg. 1's stage times, plus each group's own iteration time (``G_C``, ``G_A``: its
    slowest trainer's pipeline, as :func:`_iteration_time` counts it), which the work balance
    weighs."""
    cpu = [t for t, k in enumerate(kinds) if k != "accel"]
    acc = [t for t, k in enumerate(kinds) if k == "accel"]
    per = _trainer_times(results, times, prefetch)
    return {"T_SC": sum(times[t]["sample"] for t in cpu),
            "T_SA": sum(times[t]["sample"] for t in acc),
            "T_Load": sum(times[t]["load"] for t in range(len(kinds))),
            "T_Tran": sum(times[t]["transfer"] for t in acc),
            "T_TC": max((results[t]["seconds"] for t in cpu), default=0.0),
            "T_TA": max((results[t]["seconds"] for t in acc), default=0.0),
            "G_C": max((per[t] for t in cpu), default=0.0),
            "G_A": max((per[t] for t in acc), default=0.0)}


def _trainer_times(results, times, prefetch: bool) -> list[float]:
    """Each trainer's share of an iteration: with prefetching its slowest stage (sampling +
    loading, transfer, training), without their sum."""
    per = []
    for r, t in zip(results, times):
        stages = (t["sample"] + t["load"], t["transfer"], r["seconds"])
        per.append(max(stages) if prefetch else sum(stages))
    return per


def _iteration_time(kinds, results, times, prefetch: bool) -> float:
    """Seconds of one iteration of the synchronous pipeline: with prefetching, its slowest
    stage (a trainer's sampling + loading, its transfer, or its training); without, the
    slowest trainer's sum of all four."""
    return max(_trainer_times(results, times, prefetch))


def evaluate(model: GNN, dataset: Dataset, X: np.ndarray) -> dict:
    """Accuracy of every split from a full-neighbourhood, full-graph forward pass."""
    graphs = layer_graphs(dataset.graph, [None] * model.n_layers, 0)
    pred = layerwise_forward(model, graphs, torch.from_numpy(X)).argmax(1).numpy()
    return {name: float((pred[m] == dataset.labels[m]).mean()) if m.any() else 0.0
            for name, m in (("train", dataset.train_mask), ("val", dataset.val_mask),
                            ("test", dataset.test_mask))}


def resolve_split(dataset: Dataset, cfg: HybridConfig, progress=None):
    """``cfg`` with its initial CPU share decided, and how: with ``cpu_share="model"`` the
    performance model's best split on this machine (:func:`~moagcn.host.hyscale.perf.
    model_split`, the paper's design-time mapping: a calibration here, then an epoch
    predicted at every share), else the given share or an equal one per trainer. Returns
    ``(cfg, info)``; ``info["source"]`` is ``model``, ``given``, ``even`` or ``one group`` (only
    CPU or only accelerator trainers: nothing to split)."""
    kinds = cfg.kinds()
    n_cpu = sum(k != "accel" for k in kinds)
    if n_cpu in (0, len(kinds)):            # one group: nothing to split, whatever was asked
        return (dataclasses.replace(cfg, cpu_share=None),
                {"source": "one group", "cpu_share": 1.0 if n_cpu else 0.0})
    if cfg.cpu_share == "model":
        info = dict(model_split(dataset, cfg, progress=progress), source="model")
        return dataclasses.replace(cfg, cpu_share=info["cpu_share"]), info
    share = cfg.cpu_share if cfg.cpu_share is not None else n_cpu / len(kinds)
    return cfg, {"source": "given" if cfg.cpu_share is not None else "even",
                 "cpu_share": float(share)}


def train_hybrid(dataset: Dataset, cfg: HybridConfig, on_iteration=None,
                 rank: int | None = None, progress=None, split: dict | None = None) -> dict:
    """Train with the configured trainers; returns the report (see the module docstring).

    In one process (``rank`` None) every trainer runs here and the synchronizer sums their
    gradients; as rank ``rank`` of a torch.distributed group (one process per trainer, see
    :func:`train_hybrid_distributed`) only that trainer runs, its gradients are all-reduced,
    and the stage times are all-gathered so that every rank takes the same DRM decisions.
    ``cpu_share="model"`` first calibrates the performance model here and takes its best
    split (:func:`resolve_split`; ``progress`` gets its lines); ``split``: a split already
    resolved (:func:`resolve_split`'s ``info``; ``cfg.cpu_share`` is then its share). Where the
    split came from the model (``split["table"]``) and ``cfg.recheck``, the model's prediction is
    re-checked every epoch (:class:`~moagcn.host.hyscale.recheck.ModelCheck`, on the stage
    times the DRM gets; the report's ``model_check``, and ``predicted_iteration_s`` beside each
    iteration's ``iteration_s``), re-calibrated where an epoch is off by more than
    ``cfg.recheck_threshold``, and the DRM moved to the re-calibrated model's best share
    (``DRM.resplit``).
    """
    cfg.validate(dataset)
    if split is None:
        cfg, split = resolve_split(dataset, cfg, progress)
    elif cfg.cpu_share == "model":
        cfg = dataclasses.replace(cfg, cpu_share=None if split["source"] == "one group"
                                  else float(split["cpu_share"]))
    kinds, fanouts = cfg.kinds(), cfg.fanout_list()
    local = list(range(len(kinds))) if rank is None else [rank]
    X = row_normalize(dataset.features) if cfg.normalize_features else \
        np.asarray(dataset.features, dtype=np.float32)
    torch.manual_seed(cfg.seed)
    master = GNN(cfg.model, dataset.n_features, cfg.hidden, dataset.n_classes, len(fanouts))
    opt = torch.optim.Adam(master.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    accel = AcceleratorChoice(cfg.device, cfg.design, cfg.preset, dict(cfg.params))
    cpu = AcceleratorChoice("cpu")
    cuda = torch.device("cuda") if "gpu" in kinds else None    # validate: CUDA is there
    degrees = dataset.graph.degrees().astype(np.int64)
    trainers = {t: Trainer(t, kinds[t], master, accel if kinds[t] == "accel" else cpu,
                           cuda if kinds[t] == "gpu" else torch.device("cpu"), fanouts,
                           cfg.dropout, cfg.seed, degrees, cfg.update_on) for t in local}
    n_cpu = sum(k != "accel" for k in kinds)
    n_acc = len(kinds) - n_cpu
    share = split["cpu_share"]              # resolve_split's: given, even, model or one group
    drm = DRM(share, {"sampler": cfg.sampler_threads, "trainer": cfg.trainer_threads},
              cfg.drm)
    # the split of iteration i uses the share decided after iteration i - depth - 1 (after
    # i - 1 without prefetching): stage A samples up to ``depth`` iterations ahead, and every
    # process must cut the same batch the same way whenever it gets there
    history = [drm.cpu_share]
    lag = cfg.depth + 1 if cfg.prefetch and cfg.depth > 0 else 1
    check = ModelCheck(ModelTable(split["table"]), cfg.recheck_threshold) \
        if cfg.recheck and split.get("table") else None

    def share_at(i: int) -> float:
        k = max(0, i - lag + 1)
        if k >= len(history):
            raise RuntimeError(f"DRM: the split of iteration {i} was asked for before the "
                               f"decision it depends on (iteration {k - 1})")
        return history[k]

    sampler = NeighborSampler(dataset.graph, fanouts, cfg.seed)
    loader = FeatureLoader(X, dataset.labels)
    train_ids = training_ids(dataset.train_mask, labels=dataset.labels)
    records, it = [], 0
    prepare = BlockOperators(cfg.model, degrees, fanouts)
    use_procs = cfg.prefetch and cfg.stage_a == "process"
    overlap = cfg.prefetch and cfg.depth > 0      # stages beside the training
    procs: dict = {}
    threads_before = torch.get_num_threads()
    t_run = time.perf_counter()
    stats = []
    # the prefetchers run across epochs (the pipeline does not drain between them); they are
    # made again only where the DRM moved stage-A threads, from the next epoch on
    run = _RunBatches(train_ids, cfg.batch, cfg.seed, cfg.epochs, len(kinds))
    pfs: dict = {}
    iters: dict = {}
    workers = None
    cores: list = []        # each stage-A pool's cores (core_plan), or None where not bound

    def close_prefetchers():
        for pf in pfs.values():
            pf.close()
        if pfs:
            stats.append({t: pf.stats.as_dict() for t, pf in pfs.items()})

    try:
        with ThreadPoolExecutor(len(trainers), thread_name_prefix="moagcn-trainer") as pool:
            for epoch in range(cfg.epochs):
                torch.set_num_threads(drm.threads["trainer"])
                if workers != drm.threads["sampler"]:
                    close_prefetchers()
                    workers = drm.threads["sampler"]
                    if use_procs:         # one pool of stage-A processes for every trainer
                        for p in set(procs.values()):
                            p.close()
                        shared = StageAProcesses(sampler, loader, workers, prepare=prepare,
                                                 pin=cfg.pin_cores and rank is None)
                        cores.append(shared.cores)
                        procs = {t: shared for t in local}
                    first = it

                    def share_of(kind, i, first=first):
                        c = share_at(first + i)
                        return c / n_cpu if kind != "accel" else (1 - c) / n_acc

                    splitter = _Splitter(_Tail(run, first), kinds, share_of)
                    pfs = {t: Prefetcher(sampler, loader, splitter.view(t),
                                         salts=[(e, t, j) for e, j in
                                                map(run.position, range(first, len(run)))],
                                         depth=cfg.depth, enabled=cfg.prefetch, workers=workers,
                                         processes=procs.get(t, False), prepare=prepare)
                           for t in local}
                    iters = {t: iter(pf) for t, pf in pfs.items()}
                for _ in range(run.per_epoch):
                    b = run[it]
                    t0 = time.perf_counter()
                    for pf in pfs.values():       # depth 0: every trainer's stage A at once
                        pf.request()
                    lbs = {t: next(x) for t, x in iters.items()}
                    if cfg.concurrent and len(local) > 1:
                        futures = {t: pool.submit(trainers[t].step, lbs[t], b.size, it)
                                   for t in local}
                        results = {t: f.result() for t, f in futures.items()}
                    else:
                        results = {t: trainers[t].step(lbs[t], b.size, it) for t in local}
                    _synchronize(master, opt, trainers, results, rank is not None)
                    summary = {t: {"times": lbs[t].times, **{k: v for k, v in results[t].items()
                                                             if k != "grads"}}
                               for t in local}
                    if rank is not None:                # every rank sees every trainer
                        import torch.distributed as dist
                        parts = [None] * dist.get_world_size()
                        dist.all_gather_object(parts, summary)
                        summary = {t: v for part in parts for t, v in part.items()}
                    res = [summary[t] for t in range(len(kinds))]
                    times = [r["times"] for r in res]
                    T = _stage_times(kinds, res, times, overlap)
                    iteration_s = _iteration_time(kinds, res, times, overlap)
                    decision = drm.update(it, T, n_cpu > 0, n_acc > 0, share_at(it))
                    predicted = check.observe(b.size, share_at(it), T, iteration_s) \
                        if check is not None else None
                    checked = None
                    if check is not None and it % run.per_epoch == run.per_epoch - 1:
                        checked = check.end_epoch(epoch, drm.cpu_share)
                        if checked["resplit"] and drm.enabled and n_cpu and n_acc:
                            drm.resplit(it, checked["best_share"],
                                        f"model re-calibrated (epoch {epoch} off by "
                                        f"{100 * checked['error']:+.1f} %)")
                        if progress is not None:
                            progress(f"epoch {epoch}: predicted {checked['predicted_s']:.4f} s, "
                                     f"measured {checked['measured_s']:.4f} s "
                                     f"({100 * checked['error']:+.1f} %)"
                                     + ("; re-calibrated" if checked["recalibrated"] else ""))
                    history.append(drm.cpu_share)
                    rec = {"epoch": epoch, "iteration": it, "targets": int(b.size),
                           "loss": sum(r["loss"] for r in res) / b.size,
                           "train_acc": sum(r["correct"] for r in res) / b.size,
                           "cpu_share_used": share_at(it),
                           "sub_batches": [r["n"] for r in res],
                           "trainer_s": [r["seconds"] for r in res],
                           "iteration_s": iteration_s,
                           "throughput_targets_per_s": b.size / iteration_s if iteration_s else 0.0,
                           "edges_per_s": (sum(r["edges"] for r in res) / iteration_s
                                           if iteration_s else 0.0),
                           "wall_s": time.perf_counter() - t0, "stage_s": T,
                           "predicted_iteration_s": predicted, "drm": decision}
                    if checked is not None:
                        rec["model_check"] = checked
                    records.append(rec)
                    if on_iteration is not None:
                        on_iteration(rec)
                    it += 1
    finally:
        close_prefetchers()
        for p in set(procs.values()):
            p.close()
    torch.set_num_threads(threads_before)
    acc = evaluate(master, dataset, X)
    return {"dataset": dataset.name, "config": asdict(cfg), "trainers": kinds,
            "processes": 1 if rank is None else len(kinds),
            "test_acc": acc["test"], "val_acc": acc["val"], "train_acc": acc["train"],
            "iterations": records, "prefetch": stats, "drm_log": drm.log,
            "initial_split": split, "final_cpu_share": drm.cpu_share,
            "model_check": None if check is None else check.report(),
            "threads": drm.threads,
            "stage_a_cores": [None if c is None else {"trainers": list(c[0]), "stage_a": list(c[1])}
                              for c in cores],
            "wall_s": time.perf_counter() - t_run,
            "devices": [tr.device.counters.as_dict() for tr in trainers.values()],
            "model_state": {k: v.clone() for k, v in master.state_dict().items()}}


def _synchronize(master: GNN, opt, trainers: dict, results: dict, distributed: bool) -> None:
    """Sum the trainers' gradients (an all-reduce across processes), step, and copy the
    weights to the local replicas."""
    for j, p in enumerate(master.parameters()):
        gs = [r["grads"][j] for r in results.values() if r["grads"][j] is not None]
        p.grad = torch.stack([g.cpu() for g in gs]).sum(0) if gs else torch.zeros_like(p)
    if distributed:
        import torch.distributed as dist
        flat = torch.cat([p.grad.reshape(-1) for p in master.parameters()])
        dist.all_reduce(flat)
        for p, part in zip(master.parameters(),
                           torch.split(flat, [p.numel() for p in master.parameters()])):
            p.grad.copy_(part.reshape(p.shape))
    opt.step()
    state = master.state_dict()
    for tr in trainers.values():
        tr.model.load_state_dict(state)


def _hybrid_worker(rank, world, dense, emit, dataset, cfg, split):
    report = train_hybrid(dataset, cfg, emit if rank == 0 else None, rank=rank, split=split)
    return report if rank == 0 else None


def train_hybrid_distributed(dataset: Dataset, cfg: HybridConfig, on_iteration=None,
                             timeout_s: float = 300.0, progress=None) -> dict:
    """One torch.distributed process per trainer, each rank's gradients all-reduced every
    iteration; rank 0's report. The group is gloo also where there are GPUs: the CPU and
    accelerator trainers hold their gradients in host memory (a ``gpu`` trainer's are copied
    there before the sum), as in the paper's host-side synchronisation."""
    cfg.validate(dataset)
    world = len(cfg.kinds())
    if world < 2:
        raise UserError("--distributed runs one process per trainer: give two or more "
                        "trainers, e.g. --trainers cpu:1,accel:1")
    # the split decided once, here, so that every rank starts from the same one (calibrated
    # unbound: the ranks do not bind their stage-A processes to cores)
    cfg, split = resolve_split(dataset, dataclasses.replace(cfg, pin_cores=False), progress)
    # every rank re-checks the model on the same all-gathered stage times: the same decisions
    report = launch(_hybrid_worker, world, (dataset, cfg, split), on_event=on_iteration,
                    backend="gloo", what="distributed hybrid training", timeout_s=timeout_s)[0]
    report["initial_split"] = split
    return report

"""The S-SpMM cycle model's pass-by-pass replay (:func:`moagcn.sim.sspmm.passes.slice_schedule`)
compiled: the same event loop in C, run through ``ctypes``.

The replay is an event loop of a few microseconds per job in Python; a 100k-node graph takes
seconds, which the bit-exact ``model`` device (training) cannot afford. This module compiles the
same loop, operation for operation in IEEE double precision (no contraction into fused
multiply-adds, events popped in the same total order: progress, kind, pass, member), so it
returns the very number the Python loop returns, about a hundred times faster
(``tests/sim/test_cycle_model.py`` checks the equality on random jobs of every preset).

The library is built once with the system's C compiler (``$CC``, else ``cc``) into
``$MOAGCN_CACHE_DIR`` (default ``~/.cache/moagcn``), named by a hash of the source and the
flags. Without a compiler the Python loop runs (same numbers, slower), with one warning.
"""

from __future__ import annotations

import collections
import ctypes
import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path

import numpy as np

#: the C source; ``slice_schedules`` replays ``m`` slices (or tiles) of one job, segment ``s``
#: being rows ``bounds[s]:bounds[s + 1]``, each with its own read rate, turn rate and hold
SOURCE = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

typedef struct { double key; int64_t kind, p, i; } Ev;

/* Python's tuple order on (progress, kind, pass, member) */
static int less(const Ev *a, const Ev *b) {
    if (a->key != b->key) return a->key < b->key;
    if (a->kind != b->kind) return a->kind < b->kind;
    if (a->p != b->p) return a->p < b->p;
    return a->i < b->i;
}

typedef struct {
    Ev *h; int64_t n;
    double t, progress, end, cap, R, hold;
    int64_t active, G, L, lead;
    int64_t *pool, *pool_n;          /* per group, L context ids (-1: never used) */
    int64_t *members, *nmem, *left;  /* per pass: its groups, members, members still busy */
    double *done_t; char *done;      /* per context id (pass * G + member) */
    int64_t *dep;                    /* per context id: the pass waiting for it (-1: none) */
    int64_t *wcount, *wd, *wprev;    /* per waiting pass: contexts awaited, degree, previous */
    double *wbound;
    int err;
} St;

static void push(St *s, double key, int64_t kind, int64_t p, int64_t i) {
    Ev e = {key, kind, p, i};
    int64_t k = s->n++;
    while (k > 0) {
        int64_t up = (k - 1) / 2;
        if (!less(&e, &s->h[up])) break;
        s->h[k] = s->h[up];
        k = up;
    }
    s->h[k] = e;
}

static Ev pop(St *s) {
    Ev top = s->h[0], last = s->h[--s->n];
    int64_t k = 0, n = s->n;
    for (;;) {
        int64_t c = 2 * k + 1;
        if (c >= n) break;
        if (c + 1 < n && less(&s->h[c + 1], &s->h[c])) c++;
        if (!less(&s->h[c], &last)) break;
        s->h[k] = s->h[c];
        k = c;
    }
    if (n > 0) s->h[k] = last;
    return top;
}

static double rate(St *s) {
    if (!s->active) return 0.0;
    double x = s->R / (double)s->active;
    return x < s->cap ? x : s->cap;
}

static void advance(St *s, double t) {
    s->progress += (t - s->t) * rate(s);
    s->t = t;
}

static double next_event(St *s) {
    if (!s->n) return INFINITY;
    double r = rate(s);
    double ahead = s->h[0].key - s->progress;
    if (0.0 > ahead) ahead = 0.0;
    return r != 0.0 ? s->t + ahead / r : s->t;
}

static void activate(St *s, int64_t p, int64_t d, double t_bound, const double *prior, int64_t m) {
    double now = s->t, v = s->progress;
    double mx = prior[0];
    for (int64_t i = 1; i < m; i++) if (prior[i] > mx) mx = prior[i];
    double x = mx - (double)s->lead / s->cap;
    double t_issue = x > t_bound ? x : t_bound;
    s->active += 1;
    double setup = (double)(d <= s->lead ? d : 1) * s->cap;
    int64_t after = d - s->lead > 0 ? d - s->lead : 0;
    push(s, v + (double)after + setup + s->hold, 0, p, 0);
    for (int64_t i = 0; i < m; i++) {
        double f = prior[i];
        double fm = t_issue > f ? t_issue : f;
        push(s, v + (double)d + (fm - now) * s->cap, 1, p, i);
    }
}

static void pop_event(St *s) {
    Ev e = pop(s);
    int64_t G = s->G, p = e.p;
    if (e.kind == 0) {
        for (int64_t j = 0; j < s->nmem[p]; j++) {
            int64_t g = s->members[p * G + j];
            s->pool[g * s->L + s->pool_n[g]++] = p * G + j;
        }
        return;
    }
    int64_t c = p * G + e.i;
    s->done_t[c] = s->t;
    s->done[c] = 1;
    if (--s->left[p] == 0) {
        s->active -= 1;
        if (s->t > s->end) s->end = s->t;
    }
    int64_t q = s->dep[c];
    if (q >= 0) {
        s->dep[c] = -1;
        if (--s->wcount[q] == 0) {
            double prior[64];
            for (int64_t j = 0; j < s->nmem[q]; j++) {
                int64_t o = s->wprev[q * G + j];
                prior[j] = (o >= 0 && s->done[o]) ? s->done_t[o] : -1e18;
            }
            activate(s, q, s->wd[q], s->wbound[q], prior, s->nmem[q]);
        }
    }
}

static double one(const int64_t *deg, const int64_t *jobs, const double *arrival, int64_t n,
                  int64_t G, int64_t L, double R, int64_t lead, double cap, double hold,
                  int *err) {
    int64_t passes = 0;
    for (int64_t v = 0; v < n; v++) if (jobs[v] > 0) passes += (jobs[v] + G - 1) / G;
    St s;
    memset(&s, 0, sizeof s);
    s.G = G; s.L = L; s.R = R; s.lead = lead; s.cap = cap; s.hold = hold;
    int64_t ctx = passes * G + 1;
    s.h = malloc(sizeof(Ev) * (size_t)(passes * (G + 1) + 1));
    s.pool = malloc(sizeof(int64_t) * (size_t)(G * L));
    s.pool_n = calloc((size_t)G, sizeof(int64_t));
    s.members = malloc(sizeof(int64_t) * (size_t)ctx);
    s.nmem = malloc(sizeof(int64_t) * (size_t)(passes + 1));
    s.left = malloc(sizeof(int64_t) * (size_t)(passes + 1));
    s.done_t = malloc(sizeof(double) * (size_t)ctx);
    s.done = calloc((size_t)ctx, 1);
    s.dep = malloc(sizeof(int64_t) * (size_t)ctx);
    s.wcount = calloc((size_t)(passes + 1), sizeof(int64_t));
    s.wd = malloc(sizeof(int64_t) * (size_t)(passes + 1));
    s.wbound = malloc(sizeof(double) * (size_t)(passes + 1));
    s.wprev = malloc(sizeof(int64_t) * (size_t)ctx);
    if (!s.h || !s.pool || !s.pool_n || !s.members || !s.nmem || !s.left || !s.done_t
        || !s.done || !s.dep || !s.wcount || !s.wd || !s.wbound || !s.wprev) {
        *err = 2;
        goto out;
    }
    for (int64_t c = 0; c < ctx; c++) s.dep[c] = -1;
    for (int64_t g = 0; g < G; g++) {
        for (int64_t k = 0; k < L; k++) s.pool[g * L + k] = -1;
        s.pool_n[g] = L;
    }
    double bound = -1.0;
    int64_t nxt = 0, np_ = 0;
    int64_t used[64], prev[64], freeg[64];
    for (int64_t v = 0; v < n; v++) {
        if (jobs[v] <= 0) continue;
        int64_t d = deg[v], rest = jobs[v];
        double a = arrival[v];
        while (rest) {
            int64_t m = rest < G ? rest : G;
            rest -= m;
            for (int64_t g = 0; g < G; g++) used[g] = 0;
            for (int64_t k = 0; k < m; k++) {
                int64_t nf;
                for (;;) {
                    nf = 0;
                    for (int64_t g = 0; g < G; g++) if (s.pool_n[g] && !used[g]) freeg[nf++] = g;
                    double t_bind = bound + 1.0;
                    if (a > t_bind) t_bind = a;
                    if (s.t > t_bind) t_bind = s.t;
                    double t_event = next_event(&s);
                    if (nf && t_bind <= t_event) { advance(&s, t_bind); break; }
                    if (!s.n) { *err = 1; goto out; }
                    advance(&s, t_event);
                    pop_event(&s);
                }
                int64_t g = freeg[0];
                for (int64_t j = 0; j < nf; j++) if (freeg[j] == nxt) { g = nxt; break; }
                int64_t *pl = s.pool + g * L, pn = s.pool_n[g], at = 0;
                for (int64_t j = 0; j < pn; j++) if (pl[j] < 0) { at = j; break; }
                prev[k] = pl[at];
                memmove(pl + at, pl + at + 1, sizeof(int64_t) * (size_t)(pn - at - 1));
                s.pool_n[g] = pn - 1;
                used[g] = 1;
                s.members[np_ * G + k] = g;
                nxt = (g + 1) % G;
                bound = s.t;
            }
            int64_t p = np_++;
            s.nmem[p] = m;
            s.left[p] = m;
            int64_t busy = 0;
            for (int64_t k = 0; k < m; k++) if (prev[k] >= 0 && !s.done[prev[k]]) busy++;
            if (busy) {
                s.wcount[p] = busy; s.wd[p] = d; s.wbound[p] = bound;
                for (int64_t k = 0; k < m; k++) {
                    s.wprev[p * G + k] = prev[k];
                    if (prev[k] >= 0 && !s.done[prev[k]]) {
                        if (s.dep[prev[k]] >= 0) { *err = 3; goto out; }
                        s.dep[prev[k]] = p;
                    }
                }
            } else {
                double prior[64];
                for (int64_t k = 0; k < m; k++)
                    prior[k] = prev[k] >= 0 ? s.done_t[prev[k]] : -1e18;
                activate(&s, p, d, bound, prior, m);
            }
        }
    }
    while (s.n) {
        advance(&s, next_event(&s));
        pop_event(&s);
    }
out:
    free(s.h); free(s.pool); free(s.pool_n); free(s.members); free(s.nmem); free(s.left);
    free(s.done_t); free(s.done); free(s.dep); free(s.wcount); free(s.wd); free(s.wbound);
    free(s.wprev);
    return s.end;
}

int slice_schedules(int64_t m, const int64_t *bounds, const int64_t *deg, const int64_t *jobs,
                    const double *arrival, int64_t G, int64_t L, const double *R, int64_t lead,
                    const double *cap, const double *hold, double *out) {
    if (G < 1 || G > 64 || L < 1) return 4;
    for (int64_t s = 0; s < m; s++) {
        int err = 0;
        int64_t lo = bounds[s];
        out[s] = one(deg + lo, jobs + lo, arrival + lo, bounds[s + 1] - lo, G, L, R[s], lead,
                     cap[s], hold[s], &err);
        if (err) return err;
    }
    return 0;
}
"""

#: no contraction into fused multiply-adds, no fast math: the Python loop's doubles exactly
FLAGS = ("-O2", "-fPIC", "-shared", "-ffp-contract=off", "-fno-fast-math")

_I64 = np.ctypeslib.ndpointer(dtype=np.int64, flags="C_CONTIGUOUS")
_F64 = np.ctypeslib.ndpointer(dtype=np.float64, flags="C_CONTIGUOUS")


def _cache_dir() -> Path:
    # the build cache's root (moagcn.sim.rtl.build.cache_dir, which imports the gateware)
    root = os.environ.get("MOAGCN_CACHE_DIR")
    return Path(root) if root else Path.home() / ".cache" / "moagcn"


def _build() -> Path:
    cc = os.environ.get("CC") or "cc"
    if not shutil.which(cc):
        raise OSError(f"no C compiler ({cc})")
    tag = hashlib.sha256((SOURCE + " ".join(FLAGS) + cc).encode()).hexdigest()[:16]
    out = _cache_dir() / "sspmm-schedule" / f"schedule-{tag}.so"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(str(out) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not out.exists():
            with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
                src = Path(tmp) / "schedule.c"
                src.write_text(SOURCE)
                lib = Path(tmp) / out.name
                run = subprocess.run([cc, *FLAGS, "-o", str(lib), str(src), "-lm"],
                                     capture_output=True, text=True)
                if run.returncode:
                    raise OSError(f"{cc} failed: {run.stderr.strip()[:500]}")
                os.replace(lib, out)
    return out


@functools.cache
def library():
    """The compiled replay's entry point, or None (no compiler: the Python loop runs)."""
    if os.environ.get("MOAGCN_PY_SCHEDULE"):
        return None
    try:
        lib = ctypes.CDLL(str(_build()))
    except OSError as err:
        warnings.warn(f"the S-SpMM cycle model's replay runs in Python (same cycles, slower): "
                      f"{err}", RuntimeWarning, stacklevel=2)
        return None
    fn = lib.slice_schedules
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_int64, _I64, _I64, _I64, _F64, ctypes.c_int64, ctypes.c_int64,
                   _F64, ctypes.c_int64, _F64, _F64, _F64]
    return fn


def slice_schedules(bounds, deg, jobs, arrival, groups: int, latency: int, rates, lead: int,
                    caps, holds) -> np.ndarray | None:
    """Per segment ``s`` (rows ``bounds[s]:bounds[s + 1]`` of ``deg``, ``jobs``,
    ``arrival``), the end :func:`~moagcn.sim.sspmm.passes.slice_schedule` returns for those rows
    with read rate ``rates[s]``, turn rate ``caps[s]`` and hold ``holds[s]``; None where the
    compiled loop is not available (or, which the Python loop would raise on, it found no
    event to wait for). Replays of at least ``_REMEMBER_ROWS`` rows are remembered by a hash of
    their inputs: training aggregates the same graph under the same mask every step."""
    fn = library()
    if fn is None:
        return None
    args = [np.ascontiguousarray(bounds, dtype=np.int64),
            np.ascontiguousarray(deg, dtype=np.int64), np.ascontiguousarray(jobs, dtype=np.int64),
            np.ascontiguousarray(arrival, dtype=np.float64),
            np.ascontiguousarray(rates, dtype=np.float64),
            np.ascontiguousarray(caps, dtype=np.float64),
            np.ascontiguousarray(holds, dtype=np.float64)]
    key = None
    if args[1].size >= _REMEMBER_ROWS:
        # the model device aggregates one graph under one mask step after step: the same rows
        h = hashlib.blake2b(repr((int(groups), int(latency), int(lead))).encode(), digest_size=16)
        for a in args:
            h.update(a.tobytes())
        key = h.digest()
        if key in _REMEMBERED:
            _REMEMBERED.move_to_end(key)
            return _REMEMBERED[key].copy()
    bounds, deg, jobs, arrival, rates, caps, holds = args
    m = bounds.size - 1
    out = np.zeros(m, dtype=np.float64)
    err = fn(m, bounds, deg, jobs, arrival, int(groups), int(latency), rates, int(lead), caps,
             holds, out)
    if err:
        return None
    if key is not None:
        _REMEMBERED[key] = out.copy()
        while len(_REMEMBERED) > 32:
            _REMEMBERED.popitem(last=False)
    return out


#: replays of many rows, remembered by a hash of their inputs (the last 32)
_REMEMBER_ROWS = 20_000
_REMEMBERED: "collections.OrderedDict[bytes, np.ndarray]" = collections.OrderedDict()

"""The CPU baselines of the aggregation ``Z = A H``: measured here, and a server's roofline.

- :func:`measure`: torch sparse CSR times a dense H on this machine, the median of ``repeats``
  timed runs (after a warm-up) on one thread and on all of them; the faster median is the
  CPU's time (on a shared machine the extra threads can be slower). A CPU library computes every
  output element: there is no output mask to exploit (``Z`` is computed whole, then masked).
- :func:`roofline`: the time a named server would need, ``max(bytes / bandwidth, adds /
  peak)``, so that a comparison does not hinge on a shared 2-core box. Bytes moved (fp32
  values, int64 row pointers as torch stores them, int32/64 indices counted as 4 B):

  ``bytes = 4 nnz (column indices) + 4 nnz (values) + 8 (n + 1) (row pointers)
  + 4 n F (output written) + feature reads``,

  where the feature reads are ``4 n_cols F`` (each row once) when the features fit the
  last-level cache, else ``4 n_cols F + 4 F nnz (1 - LLC / feature bytes)``: every gathered row
  misses with the probability that a uniformly random row is not cached. Skewed graphs hit
  more (hubs are popular columns), so this is an upper bound on the traffic. ``adds = nnz F``
  at ``cores x clock x adds_per_cycle``.

Energy of a CPU row is power times time: the server at its sockets' TDP (an upper bound: the
sockets rarely draw TDP while memory-bound), this machine at the same part's TDP per core times
the threads used (its own power is not readable here; an estimate, stated as such).
"""

from __future__ import annotations

import os
import statistics
import time
import warnings
from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class ServerCpu:
    """A server's figures for :func:`roofline` (per node, all sockets)."""

    name: str
    sockets: int
    cores_per_socket: int
    clock_ghz: float            # all-core clock used for the peak
    adds_per_cycle: int         # binary32 additions per core and cycle
    mem_gb_per_s: float         # peak DRAM bandwidth of the node
    llc_mb: float               # last-level cache of the node
    tdp_w: float                # of the node (all sockets)

    @property
    def cores(self) -> int:
        return self.sockets * self.cores_per_socket

    @property
    def peak_adds_per_s(self) -> float:
        return self.cores * self.clock_ghz * 1e9 * self.adds_per_cycle

    def as_dict(self) -> dict:
        return {**asdict(self), "cores": self.cores, "peak_adds_per_s": self.peak_adds_per_s}


#: the CPU of the MixGCN cluster (Sec. 4.1: "a 64-core Intel Xeon Platinum 8462Y+", i.e. two
#: 32-core sockets). Intel's specification of the 8462Y+: 32 cores, 2.8 GHz base, 60 MB L3,
#: 300 W TDP, 8 channels of DDR5-4800 (8 x 38.4 = 307.2 GB/s) per socket; AVX-512 with two FMA
#: ports: 2 x 16 binary32 adds per cycle. The base clock stands in for the all-core AVX-512
#: clock, which Intel does not publish per SKU (it is lower: the peak is optimistic).
XEON_8462Y_2S = ServerCpu(name="2x Intel Xeon Platinum 8462Y+", sockets=2, cores_per_socket=32,
                          clock_ghz=2.8, adds_per_cycle=32, mem_gb_per_s=2 * 307.2,
                          llc_mb=2 * 60.0, tdp_w=2 * 300.0)

#: power per core assumed for this machine's measured run (the server part's TDP per core)
WATTS_PER_CORE = XEON_8462Y_2S.tdp_w / XEON_8462Y_2S.cores


def all_threads() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:          # not on Linux
        return os.cpu_count() or 1


def roofline(n_rows: int, nnz: int, width: int, n_cols: int | None = None,
             server: ServerCpu = XEON_8462Y_2S) -> dict:
    """Time of ``Z = A H`` on ``server`` by the roofline in the module docstring."""
    n_cols = n_rows if n_cols is None else n_cols
    adds = int(nnz) * int(width)
    feature_bytes = 4.0 * n_cols * width
    llc = server.llc_mb * 1e6
    miss = 0.0 if feature_bytes <= llc else 1.0 - llc / feature_bytes
    gather = feature_bytes + 4.0 * width * nnz * miss
    fixed = 8.0 * nnz + 8.0 * (n_rows + 1) + 4.0 * n_rows * width
    bytes_moved = fixed + gather
    t_mem = bytes_moved / (server.mem_gb_per_s * 1e9)
    t_compulsory = (fixed + feature_bytes) / (server.mem_gb_per_s * 1e9)
    t_compute = adds / server.peak_adds_per_s
    t = max(t_mem, t_compute)
    return {"time_s": t, "time_s_compulsory": max(t_compulsory, t_compute),
            "time_memory_s": t_mem, "time_compute_s": t_compute,
            "bound": "memory" if t_mem >= t_compute else "compute",
            "dram_bytes": int(bytes_moved), "adds": adds, "llc_miss_fraction": miss,
            "power_w": server.tdp_w, "energy_j": t * server.tdp_w,
            "server": server.as_dict()}


def _time_spmm(A, H, repeats: int) -> list[float]:
    import torch
    with torch.no_grad():
        torch.sparse.mm(A, H)                  # warm-up: allocations, thread pool
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            torch.sparse.mm(A, H)
            times.append(time.perf_counter() - t0)
    return times


def measure(indptr, indices, width: int, repeats: int = 5, threads: int | None = None,
            seed: int = 0) -> dict:
    """Median wall time of torch's CSR ``A @ H`` (binary A, random fp32 H of ``width``
    columns) on one thread and on ``threads`` (default: all this process may use).

    Returns ``time_s`` (the faster of the two medians: on a shared machine more threads are
    not always faster), ``time_s_1thread``, ``time_s_all_threads``, the raw times, the thread
    counts and an energy estimate (:data:`WATTS_PER_CORE` x threads used x time)."""
    import torch
    if repeats < 1:
        raise ValueError(f"repeats={repeats} must be >= 1")
    n = np.asarray(indptr).size - 1
    # copies: torch takes no read-only arrays (a checked CSR's are), and the product keeps them
    crow = torch.from_numpy(np.array(indptr, dtype=np.int64))
    col = torch.from_numpy(np.array(indices, dtype=np.int64))
    vals = torch.ones(col.numel(), dtype=torch.float32)
    with warnings.catch_warnings():     # "beta state", "invariant checks disabled"
        warnings.simplefilter("ignore", UserWarning)
        A = torch.sparse_csr_tensor(crow, col, vals, size=(n, n))
    g = torch.Generator().manual_seed(seed)
    H = torch.randn(n, int(width), generator=g, dtype=torch.float32)
    many = all_threads() if threads is None else int(threads)
    before = torch.get_num_threads()
    results = {}
    try:
        for t in dict.fromkeys((1, many)):
            torch.set_num_threads(t)
            results[t] = _time_spmm(A, H, repeats)
    finally:
        torch.set_num_threads(before)
    med = {t: statistics.median(v) for t, v in results.items()}
    best = min(med, key=lambda t: (med[t], t))
    power = WATTS_PER_CORE * best
    return {"time_s": med[best], "threads_used": best, "time_s_1thread": med[1],
            "time_s_all_threads": med[many], "threads": many,
            "times_s": {str(t): v for t, v in results.items()}, "repeats": repeats,
            "adds": int(col.numel()) * int(width), "power_w": power,
            "energy_j": med[best] * power,
            "power_note": f"assumed: {WATTS_PER_CORE:.2f} W per core (the 8462Y+'s TDP per "
                          f"core) x {best} thread(s); this machine's power is not measured"}

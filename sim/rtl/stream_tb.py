"""A testbench for any load / start / stream-out / done design (a :class:`StreamProtocol`).

It does, on every backend through :class:`~moagcn.sim.rtl.io.SimIO`, what the lean Verilator
harness does in C++: fill the load streams in parallel (one beat per stream per cycle, honouring
``ready``, optional idle cycles), pulse ``start``, take output beats (optional backpressure) until
``done``, and read the counters and flags. It can also reset the design in the middle of a job
and run the job again.
"""

from __future__ import annotations

import numpy as np

from moagcn.core.spec import StreamProtocol


def beat_ints(words: np.ndarray) -> list[int]:
    """Rows of 32-bit words as Python integers (word 0 in the low bits)."""
    words = np.asarray(words, dtype=np.uint32).astype(object)
    value = np.zeros(words.shape[0], dtype=object)
    for k in range(words.shape[1]):
        value += words[:, k] << (32 * k)
    return value.tolist()


def int_words(beats: list[int], words: int) -> np.ndarray:
    """Output beats as Python integers back to a (beats, words) uint32 array."""
    mask32 = (1 << 32) - 1
    return np.array([[(b >> (32 * k)) & mask32 for k in range(words)] for b in beats],
                    dtype=np.uint32).reshape(-1, words)


async def _status(io, proto: StreamProtocol) -> dict:
    """The counters, the flags and ``done`` as they are now."""
    names = (*proto.counters, *proto.flags, proto.done)
    return {name: await io.get(name) for name in names}


async def stream_job(io, proto: StreamProtocol, streams: dict[str, np.ndarray],
                     scalars: dict[str, int], idle_every: int = 0, stall_every: int = 0,
                     reset_after: int | None = None, reset_during_load: int | None = None,
                     before: tuple | None = None) -> dict:
    """Run one job; returns the counters, the flags and ``beats`` (Python integers).

    ``idle_every = k``: every k-th load cycle the load streams are idle; ``stall_every = k``:
    every k-th output cycle ``ready`` is low; ``reset_after = c``: reset ``c`` cycles after the
    start and run the whole job again; ``reset_during_load = c``: reset after ``c`` load cycles
    and run the whole job again. With either reset, ``pre_reset`` holds the status read just
    before it (proof of where it landed). ``before = (streams, scalars)``: first run that job
    to ``done`` (e.g. one that raises an error flag), keep its status as ``before``, reset, then
    run this one.
    """
    result_before = None
    if before is not None:
        first = await stream_job(io, proto, before[0], before[1])
        result_before = first
        await io.reset(1)
    for name, value in scalars.items():
        io.set(name, value)
    beats_in = {s: beat_ints(streams[s]) for s in proto.loads}
    pre_reset = None
    resets = reset_after is not None or reset_during_load is not None
    for attempt in range(2 if resets else 1):
        pos = {s: 0 for s in proto.loads}
        cycle = 0
        while any(pos[s] < len(beats_in[s]) for s in proto.loads):
            if attempt == 0 and reset_during_load is not None and cycle == reset_during_load:
                break
            idle = idle_every and cycle % idle_every == idle_every - 1
            valid = {}
            for s in proto.loads:
                valid[s] = not idle and pos[s] < len(beats_in[s])
                if valid[s]:
                    io.set(f"{s}__payload", beats_in[s][pos[s]])
                io.set(f"{s}__valid", int(valid[s]))
            ready = {s: await io.get(f"{s}__ready") for s in proto.loads if valid[s]}
            await io.tick()
            cycle += 1
            for s, r in ready.items():
                pos[s] += r
        for s in proto.loads:
            io.set(f"{s}__valid", 0)
        if attempt == 0 and reset_during_load is not None:
            pre_reset = await _status(io, proto)
            pre_reset["loaded"] = dict(pos)
            await io.reset(1)
            continue
        io.set(proto.start, 1)
        await io.tick()
        io.set(proto.start, 0)
        if attempt == 0 and reset_after is not None:
            await io.tick(reset_after)
            pre_reset = await _status(io, proto)
            await io.reset(1)
    beats = []
    cycle = 0
    out = proto.output
    while not await io.get(proto.done):
        ready = not (stall_every and cycle % stall_every == stall_every - 1)
        io.set(f"{out}__ready", int(ready))
        valid = await io.get(f"{out}__valid")
        payload = await io.get(f"{out}__payload") if valid else None
        await io.tick()
        cycle += 1
        if valid and ready:
            beats.append(payload)
    io.set(f"{out}__ready", 0)
    result = {name: await io.get(name) for name in (*proto.counters, *proto.flags)}
    result["beats"] = beats
    if pre_reset is not None:
        result["pre_reset"] = pre_reset
    if result_before is not None:
        result["before"] = result_before
    return result


async def stream_jobs(io, proto: StreamProtocol, jobs: list, idle_every: int = 0,
                      stall_every: int = 0) -> list[dict]:
    """Run ``jobs`` (``(streams, scalars)`` pairs) back to back without a reset, as the lean
    harness does: job 0 loaded, then each job started and its output taken until ``done``
    while the next job's loads are offered (a design with ping-pong buffers takes them then;
    one that is not ready gets them after ``done``, with the next job's scalars set by then).
    Returns per job the counters and flags read at its ``done``, ``beats`` and ``done_cycle``
    (cycles since the first load). A design that samples its scalars at ``start``
    (``proto.scalars_at_start``) gets the next job's as soon as a job has started."""
    if len(jobs) > 1 and not proto.restartable:
        raise ValueError("this design takes one job per reset")
    queued = [{s: beat_ints(streams[s]) for s in proto.loads} for streams, _ in jobs]
    pos = [{s: 0 for s in proto.loads} for _ in jobs]
    clock = {"cycle": 0, "load": 0}
    out = proto.output

    def pending(k):
        return any(pos[k][s] < len(queued[k][s]) for s in proto.loads)

    def offer(k):
        """Drive job k's next beats; returns the streams offered."""
        idle = idle_every and clock["load"] % idle_every == idle_every - 1
        offered = []
        for s in proto.loads:
            valid = not idle and pos[k][s] < len(queued[k][s])
            if valid:
                io.set(f"{s}__payload", queued[k][s][pos[k][s]])
                offered.append(s)
            io.set(f"{s}__valid", int(valid))
        return offered

    def clear():
        for s in proto.loads:
            io.set(f"{s}__valid", 0)

    async def load_rest(k):
        while pending(k):
            offered = offer(k)
            taken = [s for s in offered if await io.get(f"{s}__ready")]
            await io.tick()
            clock["cycle"] += 1
            clock["load"] += 1
            for s in taken:
                pos[k][s] += 1
        clear()

    results = []
    # the first job's scalars before its loads, as the harness sets them (a design may read
    # them while it loads)
    for name, value in jobs[0][1].items():
        io.set(name, value)
    await load_rest(0)
    for k, (_, scalars) in enumerate(jobs):
        nxt = k + 1 if k + 1 < len(jobs) else None
        for name, value in scalars.items():
            io.set(name, value)
        io.set(proto.start, 1)
        await io.tick()
        clock["cycle"] += 1
        io.set(proto.start, 0)
        if nxt is not None and proto.scalars_at_start:
            for name, value in jobs[nxt][1].items():
                io.set(name, value)
        # each job's patterns from its own start, as after a reset
        k_out = 0
        clock["load"] = 0
        beats = []
        while not await io.get(proto.done):
            ready = not (stall_every and k_out % stall_every == stall_every - 1)
            io.set(f"{out}__ready", int(ready))
            offered = offer(nxt) if nxt is not None else []
            # each load stream's ready, read once: what it takes, and whether the design takes
            # loads at all this cycle (the idle pattern counts only such cycles)
            takes = ({s: await io.get(f"{s}__ready") for s in proto.loads}
                     if nxt is not None and pending(nxt) else {})
            taken = [s for s in offered if takes.get(s)]
            accepting = any(takes.values())
            valid = await io.get(f"{out}__valid")
            payload = await io.get(f"{out}__payload") if valid else None
            await io.tick()
            clock["cycle"] += 1
            k_out += 1
            if valid and ready:
                beats.append(payload)
            for s in taken:
                pos[nxt][s] += 1
            if accepting and pending(nxt):     # (still pending after this cycle's beats)
                clock["load"] += 1
        clear()
        io.set(f"{out}__ready", 0)
        result = {name: await io.get(name) for name in (*proto.counters, *proto.flags)}
        result["beats"] = beats
        result["done_cycle"] = clock["cycle"]
        results.append(result)
        if nxt is not None:
            # the next job's scalars once this one is done (a design may read them while it
            # loads), then the rest of its loads
            for name, value in jobs[nxt][1].items():
                io.set(name, value)
            await load_rest(nxt)
    return results

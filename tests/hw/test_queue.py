"""The small queue (``moagcn.hw.common.queue.Queue``) against a Python deque, cycle by cycle."""

from collections import deque

import numpy as np
import pytest
from amaranth.sim import Simulator

from moagcn.hw.common.queue import Queue


@pytest.mark.parametrize("depth", [1, 3, 4])
def test_queue_follows_a_deque_with_pushes_when_full_and_pops_when_empty(depth):
    """Random pushes and pops (many of them refused: full, empty), pushes and pops in one
    cycle at every level: every word read, ``r_rdy``, ``w_rdy`` and ``level`` as a deque
    holding at most ``depth`` words says."""
    dut = Queue(12, depth)
    rng = np.random.default_rng(depth)
    model = deque()
    steps = 1500
    push = rng.random(steps) < 0.55
    pop = rng.random(steps) < 0.5
    data = rng.integers(0, 1 << 12, steps)
    checked = {"pops": 0, "full_pushes": 0}

    async def bench(ctx):
        for t in range(steps):
            assert ctx.get(dut.level) == len(model)
            assert ctx.get(dut.r_rdy) == (len(model) > 0)
            assert ctx.get(dut.w_rdy) == (len(model) < depth)
            if model:
                assert ctx.get(dut.r_data) == model[0], f"step {t}"
            ctx.set(dut.w_en, int(push[t]))
            ctx.set(dut.w_data, int(data[t]))
            ctx.set(dut.r_en, int(pop[t]))
            took = pop[t] and len(model) > 0
            if push[t] and len(model) == depth:
                checked["full_pushes"] += 1
            pushed = push[t] and len(model) < depth
            await ctx.tick()
            if took:
                model.popleft()
                checked["pops"] += 1
            if pushed:
                model.append(int(data[t]))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert checked["pops"] > 300 and checked["full_pushes"] > 20

"""Status counters: the host-visible members of a top level that count events.

Each top level names its counters in its plain-Python protocol module (a tuple of names);
:func:`counter_members` turns that tuple into ``Out`` members of a signature, and
:func:`count_events` builds the one rule they all follow: every cycle, add the event's
increment (optionally only while ``enable``, and restarting from zero on ``clear``).
"""

from __future__ import annotations

from typing import Iterable, Mapping

from amaranth.hdl import Module, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import Out


def counter_members(names: Iterable[str], bits: int) -> dict[str, wiring.Member]:
    """``Out(bits)`` members named ``names``, in order, for a component's signature."""
    return {name: Out(bits) for name in names}


def count_events(m: Module, counters: Mapping[str, Value], increments: Mapping[str, Value], *,
                 clear: Value | None = None, enable: Value | None = None,
                 restart: Value | None = None) -> None:
    """Add ``increments[name]`` to ``counters[name]`` every cycle (wrapping at the counter's
    width).

    With ``enable``, only in the cycles it is high; with ``clear``, set the counter to zero
    instead (``clear`` wins over ``enable``); with ``restart``, set it to this cycle's
    increment (a count that starts in that cycle).
    """
    if restart is not None:
        if clear is not None or enable is not None:
            raise ValueError("count_events: restart replaces clear and enable; give one")
        for name, inc in increments.items():
            counter = counters[name]
            with m.If(restart):
                m.d.sync += counter.eq(inc)
            with m.Else():
                m.d.sync += counter.eq(counter + inc)
        return
    for name, inc in increments.items():
        counter = counters[name]
        add = counter.eq(counter + inc)
        if clear is None:
            if enable is None:
                m.d.sync += add
            else:
                with m.If(enable):
                    m.d.sync += add
            continue
        with m.If(clear):
            m.d.sync += counter.eq(0)
        if enable is None:
            with m.Else():
                m.d.sync += add
        else:
            with m.Elif(enable):
                m.d.sync += add


def counters_of(component, names: Iterable[str]) -> dict[str, Value]:
    """``{name: component.<name>}`` for the counter members ``names`` of ``component``."""
    return {name: getattr(component, name) for name in names}

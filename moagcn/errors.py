"""Errors a user can act on.

Anything raised as a :class:`UserError` is printed by the CLI as one line (no traceback) and
turns into a non-zero exit status. The message names the input, the problem and the fix.
"""


class UserError(ValueError):
    """Bad input or a missing tool; the message says what to change.

    A ``ValueError``, so library users (``moagcn.nn``, ``moagcn.interop``) can catch it as the
    usual error for a bad argument."""


class SimulatorNotFound(UserError):
    """A simulator backend was requested but its executable is not installed."""


class SimulationError(RuntimeError):
    """A simulation ran but its testbench failed; carries the testbench's own traceback."""

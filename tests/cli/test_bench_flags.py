"""Every bench and experiment that runs an accelerator (its model or its RTL) takes the five
shared flags, ``--device``, ``--simulator``, ``--design``, ``--preset`` and ``--param``, added by
one helper (:func:`moagcn.core.options.add_accelerator_flags`) with one help text; a bench
about one design refuses any other in one line; and each bench's defaults are what they were
before the flags were shared (the same default run). The ``moagcn`` commands that run one
(``sspmm run``, ``train``, ...) take them from the same helper, with the same help text.
"""

from __future__ import annotations

import argparse
import importlib
import re

import pytest

from moagcn.cli.common import accelerator_choice
from moagcn.cli.main import BENCHES, EXPERIMENTS, build_parser, main
from moagcn.core.names import DEFAULT_DESIGN, DEFAULT_DEVICE, DEFAULT_SIMULATOR
from moagcn.core.options import ACCELERATOR_FLAGS, accelerator, missing_accelerator_flags
from moagcn.core.registry import accelerator_names, get_design

#: the benches and experiments that run no accelerator, neither its model nor its RTL, and why
NO_ACCELERATOR = {
    # MixGCN Fig. 10/11: communication volume and FLOPs per worker from the runtimes' plans,
    # laid out with the cpu device; nothing is aggregated on an accelerator
    ("experiment", "fig10"): "volumes and FLOPs from the runtimes' plans only",
}
#: the ones that run accelerators but name several at once in a syntax of their own, where one
#: --design / --preset / --param would contradict it, and why
OWN_ACCELERATORS = {
    # vGNN: each fleet is a list of accelerators (--fleets "sspmm:lanes=32,sspmm:lanes=8;..."),
    # AcceleratorChoice's design[:preset][:key=value] per device, all on their models
    ("experiment", "vgnn"): "--fleets names every device of every fleet",
}

#: the shared wording each flag's help starts with (a bench may add one clause after it)
HELP = {
    "--device": "what computes: ",
    "--simulator": "what runs the RTL with --device rtl: ",
    "--design": "the accelerator: ",
    "--preset": "the design's named configuration (default ",
    "--param": "set one configuration field on top of --preset (repeatable)",
}

#: what each one's default run used before the flags were shared: (device, simulator, design,
#: preset); a default run gives the same numbers
DEFAULTS = {
    ("bench", "sspmm"): ("rtl", "verilator", "sspmm", "default"),
    ("bench", "sspmm-model"): ("rtl", "verilator", "sspmm", "default"),
    ("bench", "sspmm-weighted"): ("rtl", "verilator", "sspmm", "tiny"),
    ("bench", "sddmm"): ("rtl", "verilator", "sddmm", "default"),
    ("bench", "hyscale"): ("rtl", "verilator", "hyscale", "default"),
    ("bench", "hyscale-model-kernel"): ("rtl", "verilator", "hyscale", None),   # each shape's
    ("bench", "hyscale-overlap"): ("rtl", "verilator", "hyscale", "default"),
    ("bench", "hyscale-model"): ("model", "verilator", "sspmm", None),   # HybridConfig's
    ("bench", "hyscale-drm"): ("model", "verilator", "sspmm", None),
    ("bench", "hyscale-recheck"): ("model", "verilator", "sspmm", None),
    ("bench", "deal-spmm"): ("cpu", "verilator", "sspmm", None),
    ("bench", "model-device"): ("model", "verilator", "sspmm", None),
    ("bench", "dense-device"): ("model", "verilator", "sspmm", None),
    ("bench", "pyg"): ("model", "verilator", "sspmm", None),
    ("experiment", "deal"): ("cpu", "verilator", "sspmm", None),
    ("experiment", "supergcn"): ("cpu", "verilator", "sspmm", None),
    ("experiment", "table4"): ("model", "verilator", "sspmm", None),     # TrainConfig's
    ("experiment", "fig12"): ("model", "verilator", "sspmm", "paper"),
}


def _parsers():
    for kind, table in (("bench", BENCHES), ("experiment", EXPERIMENTS)):
        for name, module in sorted(table.items()):
            yield (kind, name), importlib.import_module(module).build_parser()


PARSERS = dict(_parsers())
RUNS_ONE = sorted(set(PARSERS) - set(NO_ACCELERATOR) - set(OWN_ACCELERATORS))


def _action(parser, option):
    return next(a for a in parser._actions if option in a.option_strings)


def test_every_one_that_runs_an_accelerator_takes_the_five_flags():
    bad = []
    for where in RUNS_ONE:
        parser = PARSERS[where]
        missing = missing_accelerator_flags(parser)
        hidden = [f for f in ACCELERATOR_FLAGS if f not in missing
                  and _action(parser, f).help == argparse.SUPPRESS]
        if missing or hidden:
            bad.append(f"moagcn {' '.join(where)}: lacks {', '.join(missing + hidden)} "
                       "(moagcn.core.options.add_accelerator_flags)")
    assert not bad, "\n".join(bad)


def test_the_exceptions_are_current():
    listed = set(NO_ACCELERATOR) | set(OWN_ACCELERATORS)
    assert listed <= set(PARSERS), f"stale: {sorted(listed - set(PARSERS))}"
    # an exception that took the flags after all belongs in the checked list
    assert all(missing_accelerator_flags(PARSERS[w]) for w in listed)
    assert set(DEFAULTS) == set(RUNS_ONE), "every one that runs an accelerator has its defaults"


def test_one_help_text_for_each_flag():
    bad = [f"moagcn {' '.join(w)} {f}: {_action(PARSERS[w], f).help!r}"
           for w in RUNS_ONE for f in ACCELERATOR_FLAGS
           if not (_action(PARSERS[w], f).help or "").startswith(HELP[f])]
    assert not bad, "help that is not the shared wording:\n" + "\n".join(bad)


@pytest.mark.parametrize("where", sorted(DEFAULTS), ids=lambda w: "-".join(w))
def test_the_default_run_chooses_what_it_did(where, capsys):
    acc = accelerator(PARSERS[where].parse_args([]))
    assert (acc.device, acc.simulator, acc.design, acc.preset) == DEFAULTS[where]
    assert acc.params == {} and capsys.readouterr().err == ""


def _one_design(where) -> tuple:
    """The designs ``where``'s --design takes (none where it lacks the flag: the first test
    says so)."""
    if "--design" in missing_accelerator_flags(PARSERS[where]):
        return ()
    return _action(PARSERS[where], "--design").accepted


@pytest.mark.parametrize("where", [w for w in RUNS_ONE if len(_one_design(w)) == 1],
                         ids=lambda w: "-".join(w))
def test_a_one_design_bench_refuses_another_in_one_line(where, capsys):
    design = _one_design(where)[0]
    other = next(n for n in accelerator_names() if n != design)
    assert main([*where, "--design", other]) == 2
    err = capsys.readouterr().err
    assert err == f"moagcn: error: --design {other}: moagcn {' '.join(where)} measures the " \
                  f"{design} design\n"


def test_a_device_a_bench_cannot_use_is_refused_with_the_reason(capsys):
    assert main(["bench", "sspmm-model", "--device", "model"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("moagcn: error: --device model: this bench compares the cycle model "
                          "with the RTL") and err.count("\n") == 1
    assert main(["experiment", "fig12", "--device", "rtl"]) == 2
    assert "model only" in capsys.readouterr().err


def test_old_field_flags_still_work_through_the_helper(capsys):
    args = PARSERS[("bench", "sspmm")].parse_args(["--fetch-rows", "2", "--param", "lanes=8"])
    assert accelerator(args).params == {"lanes": "8", "fetch_rows": "2"}
    assert capsys.readouterr().err == \
        "moagcn: --fetch-rows is deprecated; use --param fetch_rows=2\n"


def test_the_check_sees_a_bench_without_the_helper():
    planted = argparse.ArgumentParser(prog="moagcn bench planted")
    planted.add_argument("--device", choices=("rtl", "model"), help="what runs the jobs")
    planted.add_argument("--param", action="append", help="a field")
    assert missing_accelerator_flags(planted) == ["--simulator", "--design", "--preset"]


# -- the moagcn commands: the same flags, from the same helper ------------------------------------

#: the commands that run an accelerator (moagcn.cli.common.add_accelerator_args) -> the one
#: design a command runs (None: it takes --design)
COMMANDS = {"sspmm run": "sspmm", "sddmm run": "sddmm", "hyscale run": "hyscale",
            "hyscale train": None, "train": None, "infer": None}

#: each flag's one help text: the shared wording, with the command's own names and default in
#: the groups, then at most the one clause of the command's own that the helper adds ("; ...")
WORDING = {
    "--device": r"what computes: (?P<names>[a-z, ]+) \(default (?P<default>[a-z]+)\)",
    "--simulator": r"what runs the RTL with --device rtl: (?P<names>[a-z, ]+) "
                   r"\(default (?P<default>[a-z]+)\)",
    "--design": r"the accelerator: (?P<names>[\w, -]+) \(default (?P<default>[\w-]+)\)",
    "--preset": r"the design's named configuration \(default ('[\w-]+'|the design's own)\)",
    "--param": r"set one configuration field on top of --preset \(repeatable\)",
}


def _commands() -> dict:
    """``"sspmm run"`` -> its parser, for every command with --device, --simulator, --preset
    and --param."""
    out, todo = {}, [((), build_parser())]
    while todo:
        words, parser = todo.pop()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo += [((*words, n), sub) for n, sub in action.choices.items()]
        have = {o for a in parser._actions for o in a.option_strings}
        if {"--device", "--simulator", "--preset", "--param"} <= have:
            out[" ".join(words)] = parser
    return out


CLI = _commands()


def test_the_commands_that_run_an_accelerator_are_these():
    assert set(CLI) == set(COMMANDS)
    for command, design in COMMANDS.items():
        assert missing_accelerator_flags(CLI[command]) == ([] if design is None
                                                           else ["--design"]), command


def _flags():
    """``(where, flag, action)`` of every command's, bench's and experiment's shared flags."""
    for command, parser in sorted(CLI.items()):
        for flag in ACCELERATOR_FLAGS:
            if flag not in missing_accelerator_flags(parser):
                yield f"moagcn {command}", flag, _action(parser, flag)
    for where in RUNS_ONE:
        for flag in ACCELERATOR_FLAGS:
            yield f"moagcn {' '.join(where)}", flag, _action(PARSERS[where], flag)


def test_the_commands_and_the_benches_share_each_flags_help():
    bad = []
    for where, flag, action in _flags():
        m = re.fullmatch(WORDING[flag] + r"(; .+)?", action.help or "", re.DOTALL)
        if m is None:
            bad.append(f"{where} {flag}: {action.help!r}")
            continue
        if "names" in m.groupdict():
            # the names and the default it shows are the ones it takes
            accepted = getattr(action, "accepted", None) or action.choices
            shown = m["names"].split(", ")
            if accepted is not None and list(accepted) != shown:
                bad.append(f"{where} {flag}: shows {shown}, takes {list(accepted)}")
            if action.default is not None and action.default != m["default"]:
                bad.append(f"{where} {flag}: shows default {m['default']}, has {action.default}")
    assert not bad, "help that is not the shared wording:\n" + "\n".join(bad)


def test_a_commands_design_lists_every_accelerator():
    # the package's own accelerators, in the registry's order; a test-only design (tests/gsum)
    # is listed too when another test registered it before the commands' parsers were built
    names = [n for n in accelerator_names() if not get_design(n).spec.startswith("tests.")]
    for command, design in COMMANDS.items():
        if design is None:
            help_ = _action(CLI[command], "--design").help
            m = re.fullmatch(r"the accelerator: (.+) \(default sspmm\)", help_)
            assert m, help_
            shown = m[1].split(", ")
            assert shown[:len(names)] == names and set(shown) <= set(accelerator_names())
    assert "sddmm" in accelerator_names()


#: each command's required options (nothing is read: the parser alone)
REQUIRED = {"sspmm run": "--graph g --features h --out z", "sddmm run": "--graph g --q q --k k "
            "--out s", "hyscale run": "--graph g --features x --weight w --out y",
            "hyscale train": "", "train": "", "infer": "--checkpoint c"}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_commands_defaults_are_applied_by_the_command(command, capsys):
    """--device and --simulator are None when not given (the command can tell); the help
    names the defaults the command applies."""
    args = CLI[command].parse_args(REQUIRED[command].split())
    assert args.device is None and args.simulator is None and args.backend is None
    choice = accelerator_choice(args)
    assert (choice.device, choice.simulator) == (DEFAULT_DEVICE, DEFAULT_SIMULATOR)
    assert choice.design == (COMMANDS[command] or DEFAULT_DESIGN) and choice.preset is None
    assert _action(CLI[command], "--device").help.endswith(f"(default {DEFAULT_DEVICE})")
    assert _action(CLI[command], "--simulator").help.endswith(f"(default {DEFAULT_SIMULATOR})")
    assert capsys.readouterr().err == ""

"""One command-line vocabulary (moagcn.core.options): every parser of ``moagcn``, of every
``moagcn bench NAME`` and of every ``moagcn experiment NAME``, built without running anything.

Each flag has help text (an old name, hidden with ``argparse.SUPPRESS``, is the one exception),
every usage line names its own command, and no concept is spelled two ways: the table
``SYNONYMS`` names the spellings that gave way to one name, and a few rules catch the same
meaning under another name (``--seeds`` as a list, ``--scale`` as 2^K nodes). Then each old
spelling still works: it sets what the new one sets and prints one line on stderr.
"""

from __future__ import annotations

import argparse
import importlib
import re

import pytest

from moagcn.cli.main import BENCHES, EXPERIMENTS, build_parser
from moagcn.core.options import is_renamed
from moagcn.errors import UserError

#: an old spelling (never a visible flag again) -> the one name of its concept
SYNONYMS = {
    "--batch": "--batch-size",
    "--fanouts": "--fanout",
    "--repeat": "--repeats",
    "--reps": "--repeats",
    "--partitions": "--grid PxM",
    "--feature-groups": "--grid PxM",
    "--train-scale": "--rmat-scale",
    "--lanes": "--param lanes=...",
    "--slices": "--param slices=...",
    "--spes": "--param spes=...",
    "--macs": "--param macs=...",
    "--fetch-rows": "--param fetch_rows=...",
}
#: the same old words as the last part of a longer flag (``--paper-fanouts``)
SUFFIXES = ("-batch", "-fanouts", "-repeat", "-reps")
#: counts: an integer wherever they appear
COUNTS = ("--seeds", "--repeats", "--batch-size", "--rmat-scale")
#: help text that describes a log2 node count (an R-MAT scale)
LOG2 = re.compile(r"2\s*\^|log2|R-MAT scale", re.IGNORECASE)


def _walk(words, parser, out):
    out.append((" ".join(words), parser))
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                _walk(words + [name], sub, out)


def all_parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    """``(command, parser)`` of every sub-command, bench and experiment."""
    out: list = []
    _walk(["moagcn"], build_parser(), out)
    for kind, table in (("bench", BENCHES), ("experiment", EXPERIMENTS)):
        for name, module in sorted(table.items()):
            out.append((f"moagcn {kind} {name}", importlib.import_module(module).build_parser()))
    return out


PARSERS = all_parsers()


def visible_options():
    """``(command, option string, action)`` of every flag --help shows."""
    for command, parser in PARSERS:
        for action in parser._actions:
            if action.help == argparse.SUPPRESS:
                continue
            for option in action.option_strings:
                yield command, option, action


def test_every_bench_and_experiment_is_walked():
    commands = {c for c, _ in PARSERS}
    assert {f"moagcn bench {n}" for n in BENCHES} <= commands
    assert {f"moagcn experiment {n}" for n in EXPERIMENTS} <= commands
    assert {"moagcn sspmm run", "moagcn hyscale train", "moagcn train", "moagcn infer"} <= commands


def test_every_flag_has_help():
    missing = []
    for command, parser in PARSERS:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                missing += [f"{command} {a.dest}" for a in action._choices_actions if not a.help]
                continue
            if action.help == argparse.SUPPRESS:
                # hidden: only an old spelling that still works may hide
                continue
            if not (action.help or "").strip():
                missing.append(f"{command} {'/'.join(action.option_strings) or action.dest}")
    assert not missing, "without help text:\n" + "\n".join(missing)


def test_every_usage_line_names_its_command():
    bad = [f"{command}: {parser.format_usage().strip()[:60]}" for command, parser in PARSERS
           if not parser.format_usage().startswith(f"usage: {command}")]
    assert not bad, "usage lines that do not name their command:\n" + "\n".join(bad)


def test_no_concept_is_spelled_two_ways():
    bad = []
    for command, option, action in visible_options():
        if option in SYNONYMS:
            bad.append(f"{command}: {option} (the one name is {SYNONYMS[option]})")
        elif option.endswith(SUFFIXES):
            bad.append(f"{command}: {option} (spell its last word as --batch-size, --fanout, "
                       "--repeats do)")
        if option in COUNTS and action.type is not int:
            bad.append(f"{command}: {option} is a count everywhere else (a list needs another "
                       "name, e.g. --seed-list)")
        if option == "--scale" and LOG2.search(action.help or ""):
            bad.append(f"{command}: --scale is a size multiplier; 2^K nodes is --rmat-scale")
        if option != "--rmat-scale" and LOG2.search(action.help or "") and \
                re.search(r"scale", option):
            bad.append(f"{command}: {option} describes an R-MAT scale; call it --rmat-scale")
    assert not bad, "\n".join(bad)


def test_no_choice_has_a_synonym():
    """``none`` and ``off`` side by side read as one meaning: a choice list shows one."""
    bad = []
    for command, option, action in visible_options():
        if action.choices is None:
            continue
        shown = action.metavar or ",".join(map(str, action.choices))
        if {"none", "off"} <= set(re.findall(r"\w+", str(shown))):
            bad.append(f"{command} {option}: {shown}")
    assert not bad, "\n".join(bad)


def test_the_checks_see_a_planted_synonym_and_a_flag_without_help():
    p = argparse.ArgumentParser(prog="moagcn bench planted")
    p.add_argument("--batch", type=int, help="targets per mini-batch")
    p.add_argument("--quiet", action="store_true")
    assert [a.option_strings for a in p._actions if a.help is None] == [["--quiet"]]
    assert "--batch" in SYNONYMS


# -- the old spellings still work ------------------------------------------------------------------

def _module_parser(kind: str, name: str) -> argparse.ArgumentParser:
    table = BENCHES if kind == "bench" else EXPERIMENTS
    return importlib.import_module(table[name]).build_parser()


#: (parser, old argv, new argv, the notice): each old name sets what its new name sets
RENAMED = [
    (("experiment", "vgnn"), ["--scale", "9"], ["--rmat-scale", "9"],
     "--scale is now --rmat-scale"),
    (("experiment", "deal"), ["--scale", "9"], ["--rmat-scale", "9"],
     "--scale is now --rmat-scale"),
    (("bench", "hyscale-drm"), ["--scale", "9"], ["--rmat-scale", "9"],
     "--scale is now --rmat-scale"),
    (("bench", "hyscale-model"), ["--scale", "9"], ["--rmat-scale", "9"],
     "--scale is now --rmat-scale"),
    (("bench", "deal-spmm"), ["--scale", "9"], ["--rmat-scale", "9"],
     "--scale is now --rmat-scale"),
    (("bench", "dense-device"), ["--scale", "9"], ["--rmat-scale", "9"],
     "--scale is now --rmat-scale"),
    (("bench", "model-device"), ["--train-scale", "9"], ["--rmat-scale", "9"],
     "--train-scale is now --rmat-scale"),
    (("experiment", "vgnn"), ["--seeds", "0,2"], ["--seed-list", "0,2"],
     "--seeds is now --seed-list"),
    (("bench", "hyscale-model"), ["--fanouts", "5,5"], ["--fanout", "5,5"],
     "--fanouts is now --fanout"),
    (("bench", "hyscale-model"), ["--paper-fanouts", "5,5"], ["--paper-fanout", "5,5"],
     "--paper-fanouts is now --paper-fanout"),
    (("bench", "hyscale-overlap"), ["--fanouts", "5,5"], ["--fanout", "5,5"],
     "--fanouts is now --fanout"),
    (("bench", "hyscale-model"), ["--batch", "64"], ["--batch-size", "64"],
     "--batch is now --batch-size"),
    (("bench", "hyscale-drm"), ["--batch", "64"], ["--batch-size", "64"],
     "--batch is now --batch-size"),
    (("bench", "sspmm"), ["--repeat", "2"], ["--repeats", "2"], "--repeat is now --repeats"),
    (("bench", "model-device"), ["--repeat", "2"], ["--repeats", "2"],
     "--repeat is now --repeats"),
    (("bench", "deal-spmm"), ["--reps", "2"], ["--repeats", "2"], "--reps is now --repeats"),
]


@pytest.mark.parametrize("where,old,new,notice", RENAMED,
                         ids=[f"{w[1]}{o[0]}" for w, o, _, _ in RENAMED])
def test_an_old_name_sets_what_the_new_one_sets(where, old, new, notice, capsys):
    parser = _module_parser(*where)
    capsys.readouterr()
    want = parser.parse_args(new)
    assert capsys.readouterr().err == ""
    got = parser.parse_args(old)
    assert vars(got) == vars(want)
    assert capsys.readouterr().err == f"moagcn: {notice}; the old name will be removed\n"


def test_hyscale_train_batch_is_now_batch_size(capsys):
    p = build_parser()
    want = p.parse_args(["hyscale", "train", "--batch-size", "64"])
    got = p.parse_args(["hyscale", "train", "--batch", "64"])
    assert vars(got) == vars(want) and want.batch == 64
    assert capsys.readouterr().err == \
        "moagcn: --batch is now --batch-size; the old name will be removed\n"


def test_old_names_are_hidden_from_help():
    for command, parser in PARSERS:
        text = parser.format_help()
        for action in parser._actions:
            if is_renamed(action):
                for option in action.option_strings:
                    assert not re.search(rf"{re.escape(option)}\b(?!-)", text), (command, option)


# -- old spellings whose value changes form: one deprecation line each ----------------------------

def test_train_pipeline_none_is_now_layers(capsys):
    from moagcn.cli.train import pipeline_mode
    p = build_parser()
    assert p.parse_args(["train"]).pipeline == "layers"
    assert pipeline_mode("layers") == pipeline_mode("none") == "none"   # the plain MoP runtime
    assert capsys.readouterr().err == \
        "moagcn: --pipeline none is deprecated; use --pipeline layers\n"
    assert [pipeline_mode(v) for v in ("off", "natural", "rcm")] == ["off", "natural", "rcm"]
    assert p.parse_args(["train", "--pipeline", "none"]).pipeline == "none"
    assert "--pipeline {layers,off,natural,rcm}" in dict(PARSERS)["moagcn train"].format_usage()


def test_infer_partitions_and_feature_groups_are_now_grid(capsys):
    from moagcn.cli.infer import grid
    p = build_parser()
    new = p.parse_args(["infer", "--checkpoint", "c.pt", "--grid", "2x3"])
    assert grid(new) == (2, 3) and capsys.readouterr().err == ""
    old = p.parse_args(["infer", "--checkpoint", "c.pt", "--partitions", "2",
                        "--feature-groups", "3"])
    assert grid(old) == (2, 3)
    assert capsys.readouterr().err == ("moagcn: --partitions 2 --feature-groups 3 is "
                                       "deprecated; use --grid 2x3\n")
    assert grid(p.parse_args(["infer", "--checkpoint", "c.pt", "--partitions", "2"])) == (2, 1)
    for bad, needle in ((["--grid", "2by2"], "give PxM"), (["--grid", "0x1"], "at least 1"),
                        (["--feature-groups", "0"], "at least 1")):
        with pytest.raises(UserError, match=needle):
            grid(p.parse_args(["infer", "--checkpoint", "c.pt", *bad]))


@pytest.mark.parametrize("bench,old,new,notices", [
    ("hyscale", ["--spes", "2,4", "--macs", "16"], ["--param", "spes=2,4", "--param", "macs=16"],
     ["--spes is deprecated; use --param spes=2,4", "--macs is deprecated; use --param macs=16"]),
    ("sspmm-model", ["--slices", "1,2", "--lanes", "4"],
     ["--param", "slices=1,2", "--param", "lanes=4"],
     ["--slices is deprecated; use --param slices=1,2",
      "--lanes is deprecated; use --param lanes=4"]),
    ("sspmm", ["--fetch-rows", "2"], ["--param", "fetch_rows=2"],
     ["--fetch-rows is deprecated; use --param fetch_rows=2"]),
])
def test_a_bench_field_flag_is_now_a_param(bench, old, new, notices, capsys):
    from moagcn.config import parse_params
    from moagcn.core.options import field_params
    parser = _module_parser("bench", bench)
    want = field_params(parser.parse_args(new), parse_params(parser.parse_args(new).param))
    assert capsys.readouterr().err == ""
    got_args = parser.parse_args(old)
    assert field_params(got_args, parse_params(got_args.param)) == want
    assert capsys.readouterr().err.splitlines() == [f"moagcn: {n}" for n in notices]


def test_the_sweep_bench_names_a_field_it_does_not_sweep():
    from moagcn.sim.benches import validate_sspmm
    with pytest.raises(UserError, match="--param node_banks: this bench sweeps slices and lanes"):
        validate_sspmm.main(["--param", "node_banks=4"])
    with pytest.raises(UserError, match="--param lanes=x"):
        validate_sspmm.main(["--param", "lanes=x"])

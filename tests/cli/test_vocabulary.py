"""One command-line vocabulary (moagcn.core.options): every parser of ``moagcn``, of every
``moagcn bench NAME`` and of every ``moagcn experiment NAME``, built without running anything.

Each flag has help text (an old name, hidden with ``argparse.SUPPRESS``, is the one exception),
every usage line names its own command, and no concept is spelled two ways: the table
``SYNONYMS`` names the spellings that gave way to one name, and a few rules catch the same
meaning under another name (``--seeds`` as a list, ``--scale`` as 2^K nodes). No name has two
meanings either: ``MEANINGS`` fixes what a shared flag is (``--features`` a file, ``--width``
and ``--workers`` counts, ``--model`` the GNN), and a field of a design's configuration is set
with ``--param``, never with a flag of its own. Then each old spelling still works: it sets what
the new one sets and prints one line on stderr.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import re

import pytest

from moagcn.cli.main import BENCHES, EXPERIMENTS, build_parser
from moagcn.core.options import is_renamed
from moagcn.core.registry import design_names, get_design
from moagcn.errors import UserError
from moagcn.host.nn.models import GNN_NAMES as MODELS   # gcn, sage, gin and gat

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
COUNTS = ("--seeds", "--repeats", "--batch-size", "--rmat-scale", "--workers", "--width",
          "--subgroups")
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
        if option == "--scale" and LOG2.search(action.help or ""):
            bad.append(f"{command}: --scale is a size multiplier; 2^K nodes is --rmat-scale")
        if option != "--rmat-scale" and LOG2.search(action.help or "") and \
                re.search(r"scale", option):
            bad.append(f"{command}: {option} describes an R-MAT scale; call it --rmat-scale")
    assert not bad, "\n".join(bad)


# -- one name, one meaning ----------------------------------------------------------------------

#: a file suffix at the end of a metavar (``H.npy``, ``M.json``)
FILE_METAVAR = re.compile(r"\.[a-z]+$", re.IGNORECASE)


def _is_path(action) -> bool:
    """A file: not parsed as a number, and named as one (``X.npy``, ``FILE``, a help text
    that says file or path)."""
    return action.type not in (int, float) and (
        bool(FILE_METAVAR.search(action.metavar or ""))
        or bool(re.search(r"\b(file|path)\b", action.help or "", re.IGNORECASE)))


def _is_count(action) -> bool:
    return action.type is int and action.nargs is None


def _is_list(action) -> bool:
    """A comma-separated list: a string (split by the command), shown as ``X,...``."""
    return action.type is None and "," in (action.metavar or "")


def _is_gnn(action) -> bool:
    return bool(action.choices) and set(action.choices) <= set(MODELS)


def _never(action) -> bool:
    """A flag no command shows (its meaning went to other names)."""
    return False


def _not_a_field(option: str):
    """Shown only while no design's configuration has the field ``option`` names (which
    ``--param`` sets)."""
    return lambda action: option not in _field_flags()


#: flag -> (what it means in every command, the check); the second meaning of each gave way
#: to another name (see RENAMED below)
MEANINGS = {
    "--features": ("an input file of features (H.npy); a count of feature columns is --width",
                   _is_path),
    "--perf-model": ("a performance-model file (M.json)", _is_path),
    "--model": (f"the GNN, one of {', '.join(MODELS)}; a performance-model file is --perf-model",
                _is_gnn),
    "--worker-list": ("worker counts, comma-separated", _is_list),
    "--seed-list": ("seeds, comma-separated", _is_list),
    "--width-list": ("feature widths, comma-separated; a count of feature columns is --width",
                     _is_list),
    "--widths": ("not a visible flag (a list of widths is --width-list, a count of columns "
                 "--width)", _never),
    "--groups": ("not a visible flag while a design's configuration has a groups field "
                 "(--param groups=...; DEAL's SpMM sub-groups are --subgroups)",
                 _not_a_field("--groups")),
    **{option: ("a count (an int); a list needs another name, e.g. --seed-list, --worker-list",
                _is_count) for option in COUNTS},
}
#: MEANINGS flags that no command may show
HIDDEN = {"--widths", "--groups"}


def test_every_flag_means_one_thing():
    bad, seen = [], set()
    for command, option, action in visible_options():
        if option in MEANINGS:
            seen.add(option)
            meaning, check = MEANINGS[option]
            if not check(action):
                bad.append(f"{command}: {option} (metavar {action.metavar}, type "
                           f"{getattr(action.type, '__name__', action.type)}, choices "
                           f"{action.choices}) is {meaning} in every command")
    assert not bad, "\n".join(bad)
    assert seen == set(MEANINGS) - HIDDEN, f"no command has {sorted(set(MEANINGS) - seen)}"


def _field_flags() -> dict[str, list[str]]:
    """``--field-name`` -> the designs whose configuration has the field ``field_name``."""
    out: dict[str, list[str]] = {}
    for name in design_names():
        for f in dataclasses.fields(get_design(name).config_type):
            out.setdefault("--" + f.name.replace("_", "-"), []).append(name)
    return out


#: flags named like a configuration field that are something else, or that still await
#: --param: (command, flag) -> why
FIELD_NAMED_FLAGS = {
    ("moagcn arith", "--latency"): "the unit's latency; arith takes no --preset or --param",
}


def test_a_configuration_field_is_set_with_param():
    """``--param clock_mhz=20``, not ``--clock-mhz 20``: a flag named after a field of any
    design's configuration is an old spelling (hidden, :func:`add_field_flags`) or listed in
    ``FIELD_NAMED_FLAGS`` with the reason."""
    fields = _field_flags()
    bad = [f"{command}: {option} sets a field of {'/'.join(fields[option])}; use --param "
           f"{option[2:].replace('-', '_')}=..."
           for command, option, _ in visible_options()
           if option in fields and (command, option) not in FIELD_NAMED_FLAGS]
    assert not bad, "\n".join(bad)
    walked = {(c, o) for c, o, _ in visible_options()}
    assert set(FIELD_NAMED_FLAGS) <= walked, "stale FIELD_NAMED_FLAGS entries"


def test_the_meaning_checks_see_a_planted_second_meaning():
    p = argparse.ArgumentParser(prog="moagcn bench planted")
    p.add_argument("--features", type=int, help="feature columns")
    p.add_argument("--workers", metavar="M,...", help="worker counts")
    p.add_argument("--model", metavar="M.json", help="a performance model")
    a = {x.option_strings[0]: x for x in p._actions if x.option_strings}
    p.add_argument("--width-list", type=int, help="feature widths")
    p.add_argument("--widths", metavar="F,...", help="feature widths")
    p.add_argument("--groups", type=int, help="SpMM sub-groups")
    a = {x.option_strings[0]: x for x in p._actions if x.option_strings}
    planted = ("--features", "--workers", "--model", "--width-list", "--widths", "--groups")
    assert not any(MEANINGS[o][1](a[o]) for o in planted)
    assert "--clock-mhz" in _field_flags() and "--groups" in _field_flags()


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
    (("bench", "sspmm"), ["--features", "16"], ["--width", "16"], "--features is now --width"),
    (("bench", "hyscale"), ["--features", "16"], ["--width", "16"], "--features is now --width"),
    (("bench", "model-device"), ["--features", "16"], ["--width", "16"],
     "--features is now --width"),
    (("bench", "dense-device"), ["--features", "16"], ["--width", "16"],
     "--features is now --width"),
    (("experiment", "fig10"), ["--workers", "2,4"], ["--worker-list", "2,4"],
     "--workers is now --worker-list"),
    (("experiment", "supergcn"), ["--workers", "2,4"], ["--worker-list", "2,4"],
     "--workers is now --worker-list"),
    (("experiment", "supergcn"), ["--widths", "8,16"], ["--width-list", "8,16"],
     "--widths is now --width-list"),
    (("bench", "deal-spmm"), ["--groups", "2"], ["--subgroups", "2"],
     "--groups is now --subgroups"),
    (("experiment", "deal"), ["--groups", "2"], ["--subgroups", "2"],
     "--groups is now --subgroups"),
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


def test_perfmodel_predict_model_is_now_perf_model(capsys):
    p = build_parser()
    rest = ["--dataset", "cora", "--width", "8"]
    want = p.parse_args(["perfmodel", "predict", "--perf-model", "m.json", *rest])
    assert want.perf_model == "m.json" and capsys.readouterr().err == ""
    got = p.parse_args(["perfmodel", "predict", "--model", "m.json", *rest])
    assert vars(got) == vars(want)
    assert capsys.readouterr().err == \
        "moagcn: --model is now --perf-model; the old name will be removed\n"
    with pytest.raises(SystemExit):             # still required, under either name
        p.parse_args(["perfmodel", "predict", *rest])
    assert "--perf-model is required" in capsys.readouterr().err
    usage = dict(PARSERS)["moagcn perfmodel predict"].format_usage()
    assert " --perf-model M.json " in usage and "[--perf-model" not in usage


@pytest.mark.parametrize("old,new,notice", [
    (["infer", "--checkpoint", "c.pt", "--groups", "2"],
     ["infer", "--checkpoint", "c.pt", "--subgroups", "2"], "--groups is now --subgroups"),
    (["perfmodel", "fit", "--devices", "sspmm", "--dataset", "cora", "--out", "m.json",
      "--widths", "8,16"],
     ["perfmodel", "fit", "--devices", "sspmm", "--dataset", "cora", "--out", "m.json",
      "--width-list", "8,16"], "--widths is now --width-list"),
], ids=["infer--groups", "perfmodel-fit--widths"])
def test_a_cli_old_name_sets_what_the_new_one_sets(old, new, notice, capsys):
    p = build_parser()
    want = p.parse_args(new)
    assert capsys.readouterr().err == ""
    got = p.parse_args(old)
    assert vars(got) == vars(want)
    assert capsys.readouterr().err == f"moagcn: {notice}; the old name will be removed\n"


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


@pytest.mark.parametrize("where,old,new,notices", [
    ("hyscale", ["--spes", "2,4", "--macs", "16"], ["--param", "spes=2,4", "--param", "macs=16"],
     ["--spes is deprecated; use --param spes=2,4", "--macs is deprecated; use --param macs=16"]),
    ("sspmm-model", ["--slices", "1,2", "--lanes", "4"],
     ["--param", "slices=1,2", "--param", "lanes=4"],
     ["--slices is deprecated; use --param slices=1,2",
      "--lanes is deprecated; use --param lanes=4"]),
    ("sspmm-model", ["--split-degree", "32", "--node-banks", "16"],
     ["--param", "split_degree=32", "--param", "node_banks=16"],
     ["--split-degree is deprecated; use --param split_degree=32",
      "--node-banks is deprecated; use --param node_banks=16"]),
    ("sspmm", ["--fetch-rows", "2"], ["--param", "fetch_rows=2"],
     ["--fetch-rows is deprecated; use --param fetch_rows=2"]),
    ("experiment table4", ["--clock-mhz", "30"], ["--param", "clock_mhz=30.0"],
     ["--clock-mhz is deprecated; use --param clock_mhz=30.0"]),
])
def test_a_bench_field_flag_is_now_a_param(where, old, new, notices, capsys):
    from moagcn.config import parse_params
    from moagcn.core.options import field_params
    kind, name = where.split() if " " in where else ("bench", where)
    parser = _module_parser(kind, name)
    want = field_params(parser.parse_args(new), parse_params(parser.parse_args(new).param))
    assert capsys.readouterr().err == ""
    got_args = parser.parse_args(old)
    assert field_params(got_args, parse_params(got_args.param)) == want
    assert capsys.readouterr().err.splitlines() == [f"moagcn: {n}" for n in notices]


def test_the_sweep_bench_names_a_field_it_does_not_sweep():
    from moagcn.sim.benches import validate_sspmm
    with pytest.raises(UserError, match="--param fetch_rows: this bench sweeps slices and "
                                        "lanes and takes split_degree and node_banks"):
        validate_sspmm.main(["--param", "fetch_rows=2"])
    with pytest.raises(UserError, match="--param lanes=x"):
        validate_sspmm.main(["--param", "lanes=x"])
    with pytest.raises(UserError, match="--param split_degree=4,8: give one integer"):
        validate_sspmm.main(["--param", "split_degree=4,8"])
    with pytest.raises(UserError, match="--param node_banks=3: must be 0 .* or a power of two"):
        validate_sspmm.main(["--param", "node_banks=3"])
    with pytest.raises(UserError, match="--param split_degree=-1: must be >= 0"):
        validate_sspmm.main(["--split-degree", "-1"])

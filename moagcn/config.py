"""Configuration helpers shared by every design.

Designs are parameterised by frozen dataclasses. The same object drives the gateware, the golden
model, the cycle model and the synthesis run, and its canonical JSON form is what the build cache
hashes. ``--param KEY=VALUE`` options of the CLI are applied with :func:`apply_params`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import typing
from typing import Any, Mapping

from moagcn.errors import UserError


def config_dict(config: Any) -> dict[str, Any]:
    """The configuration as a plain JSON-able dict (field order preserved)."""
    return dataclasses.asdict(config)


def gateware_view(config: Any) -> Any:
    """``config`` as its gateware sees it: the fields its class names in ``HOST_FIELDS`` (read
    only by the host driver, the models or the reports, such as the clock a report assumes or the
    order the driver gives rows) put back to their defaults. Configurations that differ only in
    those fields have the same Verilog, so they share one generated file and one simulator
    build (``tests/hw/test_host_fields.py`` checks that each listed field leaves the Verilog
    unchanged)."""
    names = getattr(type(config), "HOST_FIELDS", ())
    if not names:
        return config
    return dataclasses.replace(config, **{f.name: f.default for f in dataclasses.fields(config)
                                          if f.name in names})


def config_json(config: Any) -> str:
    """Canonical JSON of a configuration (sorted keys, no whitespace): the hashing form."""
    return json.dumps(config_dict(config), sort_keys=True, separators=(",", ":"))


def config_hash(*parts: str) -> str:
    """A short stable hash of strings (configurations, sources, tool versions)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def _convert(name: str, text: str, typ: Any) -> Any:
    origin = typing.get_origin(typ)
    if typ is bool:
        low = text.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise UserError(f"--param {name}={text}: expected a boolean (true/false)")
    if typ is int:
        try:
            return int(text, 0)
        except ValueError:
            raise UserError(f"--param {name}={text}: expected an integer") from None
    if typ is float:
        try:
            return float(text)
        except ValueError:
            raise UserError(f"--param {name}={text}: expected a number") from None
    if typ is str:
        return text
    if origin is typing.Literal:
        allowed = typing.get_args(typ)
        for a in allowed:
            if str(a) == text:
                return a
        raise UserError(f"--param {name}={text}: expected one of {', '.join(map(str, allowed))}")
    raise UserError(f"--param {name}: parameters of type {typ} cannot be set from the command line")


def parse_params(items: list[str] | None) -> dict[str, str]:
    """Split ``KEY=VALUE`` strings; reject malformed ones with a clear message."""
    out: dict[str, str] = {}
    for item in items or []:
        if "=" not in item:
            raise UserError(f"--param {item!r}: expected KEY=VALUE, e.g. --param latency=4")
        key, value = item.split("=", 1)
        out[key.strip()] = value.strip()
    return out


def apply_params(config: Any, params: Mapping[str, str]) -> Any:
    """Return a copy of ``config`` with string parameters converted to the field types.

    Unknown keys are rejected with the list of valid ones; the dataclass's own validation
    (``__post_init__``) then checks the values.
    """
    hints = typing.get_type_hints(type(config))
    fields = {f.name for f in dataclasses.fields(config)}
    changes: dict[str, Any] = {}
    for key, text in params.items():
        if key not in fields:
            raise UserError(
                f"--param {key}: {type(config).__name__} has no parameter {key!r}; "
                f"valid parameters: {', '.join(sorted(fields))}"
            )
        changes[key] = _convert(key, text, hints[key])
    try:
        return dataclasses.replace(config, **changes)
    except (ValueError, TypeError) as exc:
        given = " ".join(f"--param {k}={v}" for k, v in params.items())
        raise UserError(f"invalid {type(config).__name__}"
                        f"{' (' + given + ')' if given else ''}: {exc}") from None


def lookup_preset(presets: Mapping[str, Any], name: str, what: str, **overrides) -> Any:
    """``presets[name]`` with field overrides; unknown names and bad values are a UserError."""
    try:
        base = presets[name]
    except KeyError:
        raise UserError(f"unknown preset {name!r}; choose one of {', '.join(presets)}") from None
    try:
        return dataclasses.replace(base, **overrides)
    except (TypeError, ValueError) as exc:
        raise UserError(f"invalid {what} configuration: {exc}") from None

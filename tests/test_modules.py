"""Modules with one job: a module over :data:`LIMIT` lines says in its docstring why it is one.

The reason is a paragraph of the module docstring that starts with ``One module:``. Splitting is
the default; a reason is accepted where the parts would share state or repeat each other.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("moagcn", "hw", "sim", "host", "synth")
LIMIT = 650


def oversized():
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            text = path.read_text()
            lines = text.count("\n") + 1
            if lines > LIMIT:
                yield path, lines, ast.get_docstring(ast.parse(text)) or ""


def test_long_modules_say_why_they_are_one():
    bad = [f"{p.relative_to(ROOT)}: {n} lines and no 'One module:' reason in its docstring"
           for p, n, doc in oversized() if "\nOne module:" not in "\n" + doc]
    assert not bad, "\n".join(bad)


def test_the_check_sees_a_long_module(tmp_path, monkeypatch):
    (tmp_path / "host").mkdir()
    (tmp_path / "host" / "big.py").write_text('"""A big module."""\n' + "x = 1\n" * (LIMIT + 5))
    import sys
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    found = list(oversized())
    assert [p.name for p, _, _ in found] == ["big.py"]
    assert "\nOne module:" not in "\n" + found[0][2]

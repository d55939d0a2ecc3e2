"""``python -m calibration``: one command line whose verbs stand side by side."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from calibration.cli import VERBS, main, parser

VERBS_DIR = Path(__file__).resolve().parents[3] / "calibration" / "verbs"


def test_help_lists_every_verb_with_a_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for verb in VERBS:
        assert verb.NAME in out and verb.HELP.replace("%%", "%").split()[0] in out


def test_every_verb_module_is_registered_once() -> None:
    modules = {p.stem for p in VERBS_DIR.glob("*.py") if p.stem != "__init__"}
    assert sorted(v.__name__.rsplit(".", 1)[1] for v in VERBS) == sorted(modules)
    assert len({v.NAME for v in VERBS}) == len(VERBS)


def test_every_verb_parses_its_help() -> None:
    for verb in VERBS:
        with pytest.raises(SystemExit) as stop:
            parser().parse_args([verb.NAME, "--help"])
        assert stop.value.code == 0


def test_no_verb_imports_another() -> None:
    for path in VERBS_DIR.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module == "calibration":
                names += [f"calibration.{a.name}" for a in node.names]
            assert not any(n.startswith("calibration.verbs") for n in names), f"{path.name} imports a verb: {names}"

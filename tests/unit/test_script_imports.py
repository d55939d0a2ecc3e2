"""Scripts run as ``python benchmarks/x.py`` find the repository's uninstalled packages.

Only ``services`` is installed into the venv; ``evaluation``, ``calibration`` and ``loadtests`` are
found from the repository root, which Python puts on the path only for ``python -m``. A script run by its path
must put the root on ``sys.path`` before it imports them (the grammar benchmark once failed
with ModuleNotFoundError at its first run for this reason)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UNINSTALLED = {"evaluation", "calibration", "loadtests"}
SCRIPTS = sorted([*(ROOT / "benchmarks").glob("*.py"), *(ROOT / "scripts").glob("*.py")])


def first_uninstalled_import(tree: ast.Module) -> int | None:
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in UNINSTALLED:
            return node.lineno
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] in UNINSTALLED for a in node.names):
            return node.lineno
    return None


def path_insert_line(tree: ast.Module) -> int | None:
    for node in tree.body:
        if isinstance(node, ast.Expr) and "sys.path.insert" in ast.unparse(node):
            return node.lineno
    return None


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_root_is_on_the_path_before_an_uninstalled_package_is_imported(script: Path) -> None:
    tree = ast.parse(script.read_text())
    imported = first_uninstalled_import(tree)
    if imported is None:
        return
    inserted = path_insert_line(tree)
    assert inserted is not None and inserted < imported, f"{script.name}: sys.path.insert before line {imported}"


def test_the_check_sees_a_missing_insert() -> None:
    tree = ast.parse("import sys\nfrom evaluation.pools.provenance import write_raw\nsys.path.insert(0, '.')\n")
    assert first_uninstalled_import(tree) == 2 and path_insert_line(tree) == 3

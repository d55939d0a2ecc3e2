"""No import circles and no private names taken across modules, in every package of the project.

Read from the source (AST, no imports run): every ``.py`` file of each top-level package (a
directory with an ``__init__.py``; not ``tests/``), and of ``scripts/`` and ``benchmarks/``.
``services/gen`` is generated and left out. Every import statement counts: one inside a
function, one under ``if TYPE_CHECKING:`` (a type-only import is still a dependency a reader
follows, and the first runtime use turns it into a circle).

``from a.b import c`` is an import of the module ``a.b.c`` when that is a module, else of
``a.b``; a package is its ``__init__``. A circle is a strongly connected component of that graph
(Tarjan), reported with the imports that close it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: directories of scripts: no ``__init__.py``, each file run as a program (importable as ``scripts.x``)
SCRIPT_DIRS = ("scripts", "benchmarks")
#: top-level packages that are not the project's code under check
NOT_CHECKED = ("tests",)
#: generated code: never edited by hand, imports nothing of the project
GENERATED = ("services/gen",)


@dataclass(frozen=True)
class Edge:
    """One import: ``source`` imports ``target`` (both project modules), ``name`` taken from it."""

    source: str
    target: str
    line: int
    name: str | None = None


def project_files(root: Path = ROOT) -> dict[str, Path]:
    """Module name → file, for every file under check."""
    tops = [d for d in sorted(root.iterdir()) if d.is_dir() and not d.name.startswith(".")]
    dirs = [d for d in tops if (d / "__init__.py").exists() and d.name not in NOT_CHECKED]
    dirs += [d for d in tops if d.name in SCRIPT_DIRS]
    files: dict[str, Path] = {}
    for top in dirs:
        for path in sorted(top.rglob("*.py")):
            rel = path.relative_to(root)
            if any(rel.as_posix().startswith(f"{g}/") for g in GENERATED) or "__pycache__" in rel.parts:
                continue
            parts = rel.with_suffix("").parts
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


def _package(module: str, path: Path) -> str:
    """The package a relative import in ``module`` starts from."""
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def edges_of(module: str, path: Path, modules: Mapping[str, Path]) -> Iterator[Edge]:
    """Every import in ``module`` of another project module."""
    here = module.partition(".")[0] if module.partition(".")[0] in SCRIPT_DIRS else None

    def known(name: str) -> str | None:
        if name in modules:
            return name
        # a program's directory is on its sys.path: ``import sibling`` is that directory's file
        return f"{here}.{name}" if here and f"{here}.{name}" in modules else None

    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if (target := known(alias.name)) is not None:
                    yield Edge(module, target, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _package(module, path)
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            for alias in node.names:
                target = known(f"{base}.{alias.name}") or known(base)
                if target is not None:
                    yield Edge(module, target, node.lineno, alias.name)


def project_edges(root: Path = ROOT) -> list[Edge]:
    modules = project_files(root)
    return [edge for module, path in modules.items() for edge in edges_of(module, path, modules)]


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The import circles of ``graph``: each strongly connected component of more than one
    module, or of one module that imports itself, sorted (Tarjan's algorithm, iteratively)."""
    succ = {node: sorted(set(targets)) for node, targets in graph.items()}
    for targets in list(succ.values()):
        for t in targets:
            succ.setdefault(t, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(succ):
        if start in index:
            continue
        work: list[tuple[str, int]] = [(start, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if i < len(succ[node]):
                work.append((node, i + 1))
                nxt = succ[node][i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if work:  # hand this node's low link to the node that reached it
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in succ[node]:
                    found.append(sorted(component))
    return sorted(found)


def cycle_report(edges: Iterable[Edge], root: Path = ROOT) -> list[str]:
    """One paragraph per circle: its modules and the imports between them."""
    edges = list(edges)
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(e.source, set()).add(e.target)
    files = project_files(root)
    report = []
    for component in cycles(graph):
        members = set(component)
        inside = sorted({(e.source, e.target, e.line) for e in edges if e.source in members and e.target in members})
        lines = [f"  {files[s].relative_to(root)}:{line} imports {t}" for s, t, line in inside]
        report.append(f"circle of {len(component)}: {', '.join(component)}\n" + "\n".join(lines))
    return report


def _private(name: str | None) -> bool:
    return name is not None and name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_imports(root: Path = ROOT) -> list[str]:
    """Every ``from x import _name`` of a project module (a module's private names are its own)."""
    files = project_files(root)
    return sorted(
        f"{files[e.source].relative_to(root)}:{e.line}: imports {e.name} from {e.target}"
        for e in project_edges(root)
        if _private(e.name)
    )


def test_the_project_has_no_import_circle() -> None:
    report = cycle_report(project_edges())
    assert not report, "import circles (move the shared piece down into a module both import):\n" + "\n".join(report)


def test_no_module_imports_another_modules_private_name() -> None:
    found = private_imports()
    assert not found, "private names imported across modules:\n" + "\n".join(found)


def test_every_project_package_is_read() -> None:
    modules = project_files()
    assert {"services", "evaluation", "loadtests", "scripts", "benchmarks"} <= {m.partition(".")[0] for m in modules}
    assert "services.gateway.app" in modules
    assert not any(m.startswith(("services.gen.", "tests.")) for m in modules)


def test_the_finder_reports_a_circle_and_only_the_circle() -> None:
    graph = {"a": ["b"], "b": ["c"], "c": ["a", "d"], "d": ["e"], "e": [], "f": ["a"]}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": ["a"], "b": []}) == [["a"]]
    assert cycles({"a": ["b", "c"], "b": ["c"], "c": []}) == []
    assert cycles({"a": ["b"], "b": ["a"], "c": ["d"], "d": ["c"]}) == [["a", "b"], ["c", "d"]]


def test_the_finder_handles_a_long_chain_closed_at_its_end() -> None:
    n = 5000  # deeper than Python's recursion limit
    graph = {f"m{i}": [f"m{i + 1}"] for i in range(n)} | {f"m{n}": ["m0"]}
    (circle,) = cycles(graph)
    assert len(circle) == n + 1


def _write(root: Path, files: Mapping[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_deferred_type_only_and_relative_imports_close_a_circle(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n",
            "pkg/b.py": "def f():\n    from . import c\n",
            "pkg/c.py": "from .sub import thing\n",
            "pkg/sub/__init__.py": "from ..a import A\n",
            "tests/__init__.py": "import pkg.a\n",
            "scripts/run.py": "import pkg.b\nimport helper\n",
            "scripts/helper.py": "import pkg\n",
        },
    )
    edges = {(e.source, e.target) for e in project_edges(tmp_path)}
    assert edges == {
        ("pkg.a", "pkg.b"),
        ("pkg.b", "pkg.c"),
        ("pkg.c", "pkg.sub"),
        ("pkg.sub", "pkg.a"),
        ("scripts.run", "pkg.b"),
        ("scripts.run", "scripts.helper"),
        ("scripts.helper", "pkg"),
    }
    (report,) = cycle_report(project_edges(tmp_path), tmp_path)
    assert report.startswith("circle of 4: pkg.a, pkg.b, pkg.c, pkg.sub\n")
    assert "pkg/a.py:3 imports pkg.b" in report


def test_a_private_name_taken_from_another_module_is_reported(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.a import public\n",
            "pkg/a.py": "_hidden = 1\npublic = 2\n__all__ = ['public']\n",
            "pkg/b.py": "from pkg.a import _hidden, __all__\nfrom pkg import public\nfrom os import _exit\n",
        },
    )
    assert private_imports(tmp_path) == ["pkg/b.py:1: imports _hidden from pkg.a"]

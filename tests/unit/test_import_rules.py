"""Import rules between the parts of ``services/``, read from the source (AST, no imports run).

1. The gateway imports nothing from the orchestrator, the policy, the verifier or the sandbox.
2. Strategies (``services/search/strategies/``) import no grpc, redis, celery or kombu,
   and no ``*_pb2_grpc`` stub (``*_pb2`` message modules are plain protobuf and allowed).
3. A service imports another part of ``services/`` only through ``services.gen`` (proto
   stubs), ``services.common`` and ``services.jobs`` (the job contract); ``services.jobs``
   imports neither the gateway nor the orchestrator.

Every import statement counts, including ones inside functions (a lazy import is still a
dependency). Only direct imports are checked: ``services.common.errors`` itself imports grpc
(for ``StatusCode``), so strategies still load grpc transitively through it.

Deliberate exceptions, each with its reason, are in ``EXCEPTIONS``; tools outside
``services/`` (``loadtests/``, ``benchmarks/``) are not checked: they drive services from
outside, and the benchmarks deliberately measure a service's internals in one process.
The one client of the sandbox service is ``services/common/sandbox_client.py`` (the verifier,
the tests and the tools use it), so a service that runs code never imports ``services.sandbox``.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHARED = ("gen", "common", "jobs")
GATEWAY_FORBIDDEN = ("orchestrator", "search", "policy", "verifier", "sandbox")
SEARCH_FORBIDDEN = ("grpc", "grpc_health", "redis", "celery", "kombu")
#: the search library and the one service that runs it
SEARCH, SEARCH_USERS = "search", ("orchestrator",)

# (importing file, imported package) -> why the rule does not apply.
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("services/stack.py", "*"): "the local launcher starts every service and reads each one's settings",
    ("services/cli.py", "*"): "`ttc serve` is the composition point: it hands the orchestrator's full job "
    "validation to the gateway (services/jobs/validation.py) and dispatches to each service's main()",
}


def imports(path: Path) -> Iterator[tuple[int, str]]:
    """``(line, module)`` for every absolute import in ``path`` (``from a import b`` gives ``a.b`` too)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
            for alias in node.names:
                yield node.lineno, f"{node.module}.{alias.name}"


def package_of(path: Path, root: Path) -> str:
    """``gateway`` for ``services/gateway/...``; the file itself for top-level modules."""
    rel = path.relative_to(root / "services")
    return rel.parts[0] if len(rel.parts) > 1 else f"services/{rel.as_posix()}"


def _excepted(rel: str, target: str) -> bool:
    return (rel, target) in EXCEPTIONS or (rel, "*") in EXCEPTIONS


def violations(root: Path = ROOT) -> list[str]:
    """One message per import statement and rule broken, sorted."""
    found: dict[tuple[str, int, str], str] = {}
    for path in sorted((root / "services").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("services/gen/"):
            continue
        owner = package_of(path, root)
        in_search = owner == SEARCH
        for line, module in imports(path):
            parts = module.split(".")
            if in_search and (parts[0] in SEARCH_FORBIDDEN or parts[-1].endswith("_pb2_grpc")):
                message = f"{rel}:{line}: the search library must not import {module} (no grpc, redis or celery)"
                found.setdefault((rel, line, "purity"), message)
            if parts[0] != "services" or len(parts) < 2:
                continue
            target = parts[1]
            if target == owner or target in SHARED or _excepted(rel, target):
                continue
            if target == SEARCH and owner in SEARCH_USERS:
                continue
            if owner == "gateway" and target in GATEWAY_FORBIDDEN:
                message = f"{rel}:{line}: the gateway must not import {module}"
            elif owner == "jobs" and target in ("gateway", "orchestrator", SEARCH):
                message = f"{rel}:{line}: services/jobs must import neither the gateway nor the orchestrator"
            else:
                message = (
                    f"{rel}:{line}: {owner} imports {module}; services meet only through "
                    "services.gen, services.common and services.jobs"
                )
            found.setdefault((rel, line, "layers"), message)
    return sorted(found.values())


def test_import_rules_hold() -> None:
    assert violations() == [], "\n".join(violations())


@pytest.mark.parametrize(
    ("path", "source", "expected"),
    [
        ("services/gateway/x.py", "from services.search.run import validate_job\n", "the gateway must not"),
        ("services/search/strategies/x.py", "def f():\n    import grpc\n", "search library must not import grpc"),
        ("services/search/x.py", "import redis\n", "search library must not import redis"),
        ("services/search/strategies/x.py", "from services.gen.ttc.v1 import policy_pb2_grpc\n", "_pb2_grpc"),
        ("services/verifier/x.py", "from services.search.budget import Budget\n", "services meet only"),
        ("services/jobs/x.py", "from services.search import run\n", "neither the gateway"),
        ("services/verifier/x.py", "from services.sandbox.client import SandboxClient\n", "services meet only"),
        ("services/jobs/x.py", "import services.orchestrator.worker\n", "neither the gateway"),
    ],
)
def test_the_rule_catches_forbidden_imports(tmp_path: Path, path: str, source: str, expected: str) -> None:
    file = tmp_path / path
    file.parent.mkdir(parents=True)
    file.write_text(source)
    found = violations(tmp_path)
    assert found and expected in found[0], found


def test_protobuf_messages_are_allowed_in_strategies(tmp_path: Path) -> None:
    file = tmp_path / "services/search/strategies/x.py"
    file.parent.mkdir(parents=True)
    file.write_text("from services.gen.ttc.v1 import orchestrator_pb2\nfrom services.jobs.errors import JobError\n")
    assert violations(tmp_path) == []


def test_the_search_library_loads_no_queue_or_store_client() -> None:
    """Transitively too: importing every search module in a fresh interpreter loads no redis,
    celery or kombu (the direct rule above cannot see what a shared module pulls in)."""
    modules = sorted(
        ".".join(p.relative_to(ROOT).with_suffix("").parts)
        for p in (ROOT / "services" / "search").rglob("*.py")
        if p.name != "__init__.py"
    )
    code = "import importlib, sys\n" + "".join(f"importlib.import_module({m!r})\n" for m in modules)
    code += "print(sorted({n.split('.')[0] for n in sys.modules} & {'redis', 'celery', 'kombu'}))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout

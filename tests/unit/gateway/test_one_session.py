"""The gateway's job lifecycle is written once: ``session.py`` holds the one loop over
a job's event stream, the one counter of requests by status and the one deadline; the two
renderers (chat/completions in ``serving.py``, the Responses API in ``responses/``) import
nothing of each other and touch no Redis. Read from the source (AST), so a second copy fails."""

from __future__ import annotations

import ast
from pathlib import Path

GATEWAY = Path("services/gateway")
SESSION = GATEWAY / "session.py"
RENDERERS = [
    GATEWAY / "serving.py",
    GATEWAY / "streaming.py",
    GATEWAY / "formatting.py",
    # The Responses API's own store of finished responses (ttc:response:<id>) is Redis by design;
    # the rest of responses/ renders sessions and touches no Redis.
    *(p for p in GATEWAY.glob("responses/*.py") if p.name != "store.py"),
]


def _modules() -> dict[Path, ast.Module]:
    return {path: ast.parse(path.read_text(), str(path)) for path in sorted(GATEWAY.rglob("*.py"))}


def _imports(tree: ast.Module) -> list[tuple[str, list[str]]]:
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names]
    return found


def _attribute_calls(tree: ast.Module, name: str) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == name
    ]


def test_responses_imports_nothing_of_serving() -> None:
    for path, tree in _modules().items():
        if "responses" not in path.parts:
            continue
        for module, _ in _imports(tree):
            assert module != "services.gateway.serving", f"{path} imports serving.py"
        private = [
            node.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and isinstance(node.value, ast.Attribute)  # self.x._private: another object's internals
        ]
        assert private == [], f"{path} reaches into another object's privates: {private}"


def test_one_stream_loop_reads_a_jobs_events() -> None:
    loops = []
    for path, tree in _modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.AsyncFor) and isinstance(node.iter, ast.Call):
                func = node.iter.func
                if isinstance(func, ast.Attribute) and func.attr == "follow":
                    loops.append(f"{path}:{node.lineno}")
    assert len(loops) == 1 and loops[0].startswith(str(SESSION)), loops


def test_one_status_counter() -> None:
    counters = []
    for path, tree in _modules().items():
        for call in _attribute_calls(tree, "labels"):
            owner = call.func.value  # type: ignore[attr-defined]
            # ttc_gateway_requests_total (endpoint, effort, strategy, status); the middleware's
            # ttc_requests_total (service, route, status) counts the HTTP requests of every route.
            if isinstance(owner, ast.Attribute) and owner.attr == "requests" and len(call.args) == 4:
                counters.append(f"{path}:{call.lineno}")
    assert len(counters) == 1 and counters[0].startswith(str(SESSION)), counters


def test_one_deadline() -> None:
    """A deadline is computed from ``job_timeout_s`` in the session only."""
    computed = sorted(
        f"{path}:{node.lineno}"
        for path, tree in _modules().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.BinOp) and "job_timeout_s" in ast.dump(node)
    )
    assert computed and all(c.startswith(str(SESSION)) for c in computed), computed


def test_the_renderers_touch_no_redis_and_no_job_store() -> None:
    for path in RENDERERS:
        for module, _ in _imports(ast.parse(path.read_text())):
            assert not module.startswith("redis"), f"{path} imports {module}"
            assert module not in ("services.jobs.events", "services.jobs.queue"), f"{path} imports {module}"


def test_no_record_closure_changes_the_job_after_planning() -> None:
    """No renderer assigns to a planned job's fields (``plan.job.quiet = ...``): planning decides them."""
    for path in [*RENDERERS, SESSION]:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Assign | ast.AugAssign):
                continue
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                text = ast.unparse(target)
                assert "plan.job." not in text, f"{path}:{node.lineno}: {text}"

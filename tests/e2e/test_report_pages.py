"""The report page and the trace viewer, opened in headless Chromium: charts and tree render,
and the browser console stays free of errors (screenshot test).

The trace viewer is served the way the gateway serves it (``/ui/traces/{id}`` → the static
page, ``/v1/traces/{id}`` → the trace as the trace store writes it: ``MessageToDict`` of a
``ttc.v1.SearchTrace`` built with the orchestrator's own ``Trace``) by a local HTTP server, so
this test needs neither a model nor Redis.
"""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict

from evaluation.report.html import write_report
from evaluation.report.records import RequestRecord
from evaluation.report.tables import Pricing, build_rows, totals
from services.gen.ttc.v1 import orchestrator_pb2
from services.search.trace import Trace
from tests.helpers.processes import ROOT, free_port

pytestmark = pytest.mark.e2e
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
VIEWER = ROOT / "services" / "gateway" / "static" / "trace_viewer.html"


def sample_trace() -> dict[str, Any]:
    """A small MCTS-shaped search: two expansions, a refinement, votes and verification."""
    trace = Trace("What is 17 + 25?", job_seed=7)
    a = trace.add(trace.root.id, "generate", text="17 + 25 = 42. \\boxed{42}", score=0.9, seed=11, tokens=14, visits=5)
    b = trace.add(trace.root.id, "generate", text="17 + 25 = 32. \\boxed{32}", score=0.2, seed=12, tokens=14, visits=2)
    trace.add(a.id, "verify", text="passed", score=0.95, tokens=3, visits=1)
    r = trace.add(b.id, "refine", text="Recheck: 42. \\boxed{42}", score=0.8, seed=13, tokens=10, visits=1)
    trace.add(r.id, "verify", text="passed", score=0.9, tokens=3, visits=1)
    trace.mark_chosen(a.id)
    result = orchestrator_pb2.SearchResult(
        job_id="job-1", answer="42", strategy="mcts", termination=orchestrator_pb2.TERMINATION_COMPLETED,
        budget_used=orchestrator_pb2.BudgetUse(generated_tokens=44, policy_calls=3, verifier_calls=2, wall_seconds=1.5),
        trace_id="trace-abc",
    )  # fmt: skip
    proto = orchestrator_pb2.SearchTrace(trace_id="trace-abc", nodes=trace.to_proto_nodes(), result=result)
    return MessageToDict(proto, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)


def write_sample_report(out: Path) -> Path:
    def rec(pid: str, effort: str, strategy: str, ok: bool, tokens: int, latency: float, level: int) -> RequestRecord:
        return RequestRecord(run_id="r", problem_id=pid, dataset="chain_sum", level=level, split="heldout", sample=0,
                             effort_requested=effort, strategy_pinned=strategy, outcome="correct" if ok else "wrong",
                             correct=ok, answer="1", prompt_tokens=30, completion_tokens=tokens, latency_s=latency,
                             started_at=1000.0, candidates=[("1", ok), ("2", False)] if strategy else [])  # fmt: skip

    records = [
        rec(f"p{i}", effort, strategy, (i + j) % 3 != 0, 80 * (j + 1), 0.5 * (j + 1), 1 + i % 3)
        for i in range(6)
        for j, (effort, strategy) in enumerate([("low", ""), ("medium", "self_consistency:n=3"), ("high", "")])
    ]
    rows = build_rows(records, Pricing())
    return write_report(out, "report under test", rows, totals(records), {"model": "test"})


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    report = write_sample_report(tmp_path / "report")
    trace = json.dumps(sample_trace()).encode()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            if self.path.startswith("/v1/traces/trace-abc"):
                body, kind = trace, "application/json"
            elif self.path.startswith("/ui/traces/"):
                body, kind = VIEWER.read_bytes(), "text/html"
            elif self.path == "/report.html":
                body, kind = report.read_bytes(), "text/html"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def open_page(url: str, shot: Path, ready: str) -> tuple[list[str], Any]:
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url}"))
        page.goto(url)
        page.wait_for_selector(ready, timeout=15_000)
        page.screenshot(path=str(shot), full_page=True)
        counts = page.evaluate(
            """() => ({svg: document.querySelectorAll('svg').length,
                       circles: document.querySelectorAll('#tree circle').length,
                       chosen: document.querySelectorAll('#tree .node.chosen').length,
                       chosenEdges: document.querySelectorAll('#tree .edge.chosen').length,
                       paths: document.querySelectorAll('svg path').length,
                       rows: document.querySelectorAll('#rows tbody tr').length,
                       status: (document.getElementById('status') || {}).textContent || ''})"""
        )
        browser.close()
    return errors, counts


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed (make system)")
def test_report_page_renders_charts(server: str, tmp_path: Path) -> None:
    errors, counts = open_page(f"{server}/report.html", tmp_path / "report.png", "#rows tbody tr")
    assert errors == []
    assert counts["svg"] >= 2 and counts["paths"] > 10  # two matplotlib charts with drawn marks
    assert counts["rows"] > 0 and counts["status"].endswith("rows")  # the inline script ran
    assert (tmp_path / "report.png").stat().st_size > 10_000


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed (make system)")
def test_trace_viewer_draws_the_tree(server: str, tmp_path: Path) -> None:
    errors, counts = open_page(f"{server}/ui/traces/trace-abc", tmp_path / "trace.png", "#tree circle")
    assert errors == []
    assert counts["circles"] == 6  # prompt + 5 nodes
    assert counts["chosen"] == 2 and counts["chosenEdges"] == 1  # root -> chosen candidate
    assert "6 nodes" in counts["status"]
    assert (tmp_path / "trace.png").stat().st_size > 5_000

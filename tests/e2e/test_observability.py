"""Observability end to end: one trace per request, traces and jobs scoped to their key, the
trace viewer with authentication on, and every exported metric series set by real traffic.

Real parts only: Redis, the policy service on SmolLM2, the verifier, the sandbox (bwrap), a
Celery worker and the gateway with API keys, each its own process exporting spans over OTLP/gRPC
to a real OTLP TraceService receiver (``tests/helpers/otlp.py``), as they would to a collector
or Jaeger. A best-of-n search verified by ``code_tests`` touches every service: the gateway
enqueues, the worker searches, the policy generates, the verifier judges, and the sandbox runs
the tests for the verifier.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.gateway_stack import MODEL, GatewayStack
from tests.helpers.otlp import OtlpReceiver
from tests.helpers.processes import RedisServer, SandboxService, ServiceProcess, free_port, grpc_healthy, start_sandbox
from tests.helpers.prompts import COUNTING_PROMPT

pytestmark = pytest.mark.e2e

ALICE, BOB, OPS = "sk-alice-0123", "sk-bob-4567", "sk-ops-89ab"
KEYS = f"alice:{ALICE},bob:{BOB}"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
EXPORT_FAST = {"OTEL_BSP_SCHEDULE_DELAY": "200"}  # the SDK's batch delay: spans arrive within ~0.2 s
SERVER = 2  # OTLP Span.SPAN_KIND_SERVER
CODE_PARAMS = {
    "code": {"tests": [{"name": "adds", "check_code": "assert add(2, 3) == 5"}], "entry_point": "add"},
}
CODE_REQUEST = {
    "model": MODEL,
    "messages": [{"role": "user", "content": "Write a Python function add(a, b) that returns a + b."}],
    "max_tokens": 48,
    "ttc": {"strategy": "best_of_n", "n": 2, "verifier": "code_tests", "params": CODE_PARAMS},
}


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@dataclass
class Observed:
    stack: GatewayStack
    receiver: OtlpReceiver
    sandbox: SandboxService
    verifier: ServiceProcess
    verifier_metrics_port: int
    metric_urls: dict[str, str] = field(default_factory=dict)


@pytest.fixture(scope="module")
def observed(redis_server: RedisServer) -> Iterator[Observed]:
    receiver = OtlpReceiver().start()
    otel = {"TTC_OTEL_ENDPOINT": receiver.endpoint, **EXPORT_FAST}
    sandbox = start_sandbox(120000 + (os.getpid() % 500) * 64, 2, **otel)
    stack = GatewayStack(
        redis_server,
        gateway_env={"TTC_GATEWAY_API_KEYS": KEYS, "TTC_GATEWAY_ADMIN_API_KEYS": f"ops:{OPS}", **otel},
    )
    verifier_port, verifier_metrics = free_port(), free_port()
    verifier: ServiceProcess | None = None
    try:
        stack.start_policy(otel)
        verifier = ServiceProcess(
            "verifier",
            env={
                "TTC_VERIFIER_HOST": "127.0.0.1",
                "TTC_VERIFIER_PORT": str(verifier_port),
                "TTC_VERIFIER_METRICS_PORT": str(verifier_metrics),
                "TTC_VERIFIER_SANDBOX_TARGET": sandbox.target,
                "TTC_VERIFIER_POLICY_TARGET": stack.policy_target,
                **otel,
            },
        ).start()
        verifier.wait_until(lambda: grpc_healthy(f"127.0.0.1:{verifier_port}"), 60)
        stack.start_worker(
            concurrency=2,
            extra={
                "TTC_ORCHESTRATOR_VERIFIER_TARGET": f"127.0.0.1:{verifier_port}",
                "TTC_ORCHESTRATOR_SANDBOX_TARGET": sandbox.target,
                **otel,
            },
        )
        stack.start_gateway()
        yield Observed(
            stack,
            receiver,
            sandbox,
            verifier,
            verifier_metrics,
            {
                "gateway": f"{stack.url}/metrics",
                "policy": f"http://127.0.0.1:{stack.policy_metrics_port}/metrics",
                "orchestrator": f"http://127.0.0.1:{stack.worker_metrics_ports[0]}/metrics",
                "verifier": f"http://127.0.0.1:{verifier_metrics}/metrics",
                "sandbox": f"http://127.0.0.1:{sandbox.metrics_port}/metrics",
            },
        )
    finally:
        stack.stop()
        if verifier is not None:
            verifier.stop()
        sandbox.process.stop()
        receiver.stop()


def _complete(url: str, body: dict[str, Any], key: str) -> dict[str, Any]:
    reply = httpx.post(f"{url}/v1/chat/completions", json=body, headers=auth(key), timeout=300)
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


# ------------------------------------------------------------------------------------------ traces


def test_one_request_is_one_trace_from_the_gateway_to_every_service(observed: Observed) -> None:
    body = _complete(observed.stack.url, CODE_REQUEST, ALICE)
    job_id = body["ttc"]["trace_id"]
    receiver = observed.receiver
    roots: list[Any] = []
    deadline = time.monotonic() + 30
    while not roots and time.monotonic() < deadline:
        roots = [
            s
            for s in receiver.spans()
            if s.service == "gateway" and s.kind == SERVER and s.attributes.get("ttc.job_id") == job_id
        ]
        time.sleep(0.2)
    assert len(roots) == 1, [s.name for s in receiver.spans() if s.service == "gateway"]
    root = roots[0]
    assert root.name == "POST /v1/chat/completions" and root.parent_span_id == ""  # the gateway starts the trace

    spans = receiver.wait_for(root.trace_id, {"gateway", "orchestrator", "policy", "verifier", "sandbox"})
    by_service = {s.service for s in spans}
    assert by_service >= {"gateway", "orchestrator", "policy", "verifier", "sandbox"}, sorted(by_service)
    names = {(s.service, s.name) for s in spans}
    for expected in [
        ("gateway", "gateway/admission"),
        ("gateway", "gateway/enqueue"),
        ("orchestrator", "orchestrator/search"),
        ("verifier", "verifier/Verify"),
    ]:
        assert expected in names, sorted(names)
    assert any(service == "policy" and name.startswith("policy/Generate") for service, name in names), sorted(names)
    assert any(service == "sandbox" for service, _ in names)

    # Every span of the request hangs off the gateway's root: parents resolve within the trace.
    ids = {s.span_id for s in spans}
    assert all(s.parent_span_id in ids for s in spans if s is not root), [
        (s.service, s.name) for s in spans if s is not root and s.parent_span_id not in ids
    ]
    # The job's search ran in this trace and in no other.
    searches = [
        s for s in receiver.spans() if s.name == "orchestrator/search" and s.attributes.get("ttc.job_id") == job_id
    ]
    assert [s.trace_id for s in searches] == [root.trace_id]
    # The verifier's sandbox call is a child of the verifier's span: the context crossed two hops.
    verify = next(s for s in spans if s.name == "verifier/Verify")
    assert any(s.service == "sandbox" and s.parent_span_id == verify.span_id for s in spans)

    # GenAI semantic conventions on the request's span, the worker's span carries the search's usage.
    attrs = root.attributes
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.request.model"] == MODEL
    assert attrs["ttc.strategy"] == "best_of_n"
    assert attrs["ttc.effort"] == body["ttc"]["effort_applied"]
    assert attrs["gen_ai.usage.input_tokens"] == body["usage"]["prompt_tokens"]
    assert attrs["gen_ai.usage.output_tokens"] == body["usage"]["completion_tokens"]
    assert attrs["http.response.status_code"] == 200
    search = searches[0].attributes
    assert search["gen_ai.request.model"] == MODEL and search["ttc.strategy"] == "best_of_n"
    assert search["gen_ai.usage.output_tokens"] > 0


def test_a_caller_traceparent_is_joined(observed: Observed) -> None:
    trace_id = os.urandom(16).hex()
    headers = {**auth(ALICE), "traceparent": f"00-{trace_id}-{os.urandom(8).hex()}-01"}
    reply = httpx.get(f"{observed.stack.url}/v1/models", headers=headers, timeout=30)
    assert reply.status_code == 200
    spans = observed.receiver.wait_for(trace_id, {"gateway"})
    assert [s.name for s in spans if s.service == "gateway"] == ["GET /v1/models"]


# ----------------------------------------------------------------------------------------- ownership


def test_traces_are_readable_only_by_their_key_or_an_admin(observed: Observed) -> None:
    url = observed.stack.url
    body = _complete(url, {**CODE_REQUEST, "ttc": {"strategy": "single", "n": 1}, "max_tokens": 8}, ALICE)
    trace_id = body["ttc"]["trace_id"]
    mine = httpx.get(f"{url}/v1/traces/{trace_id}", headers=auth(ALICE), timeout=30)
    assert mine.status_code == 200 and mine.json()["trace_id"] == trace_id
    theirs = httpx.get(f"{url}/v1/traces/{trace_id}", headers=auth(BOB), timeout=30)
    assert theirs.status_code == 404, theirs.text
    assert theirs.json()["error"]["code"] == "trace_not_found"  # same answer as an unknown id: nothing leaks
    assert "messages" not in theirs.text and "nodes" not in theirs.text
    admin = httpx.get(f"{url}/v1/traces/{trace_id}", headers=auth(OPS), timeout=30)
    assert admin.status_code == 200 and admin.json()["nodes"]
    assert httpx.get(f"{url}/v1/traces/{trace_id}", timeout=30).status_code == 401
    import redis

    owner = redis.Redis.from_url(observed.stack.redis.url).get(f"ttc:trace:{trace_id}:owner")
    assert owner == b"alice"  # the store records the owner (the key's name, never the key)


def test_jobs_are_readable_and_cancellable_only_by_their_key_or_an_admin(observed: Observed) -> None:
    url = observed.stack.url
    request = {**CODE_REQUEST, "ttc": {"strategy": "single", "n": 1}, "max_tokens": 8, "background": True}
    created = httpx.post(f"{url}/v1/chat/completions", json=request, headers=auth(ALICE), timeout=60)
    assert created.status_code == 202, created.text
    job_id = created.json()["id"]
    for path, method in ((f"/v1/jobs/{job_id}", "GET"), (f"/v1/jobs/{job_id}/result", "GET")):
        other = httpx.request(method, f"{url}{path}", headers=auth(BOB), timeout=30)
        assert other.status_code == 404, (path, other.text)
    refused = httpx.post(f"{url}/v1/jobs/{job_id}/cancel", headers=auth(BOB), timeout=30)
    assert refused.status_code == 404
    deadline = time.monotonic() + 120
    status = ""
    while time.monotonic() < deadline:
        status = httpx.get(f"{url}/v1/jobs/{job_id}", headers=auth(ALICE), timeout=30).json()["status"]
        if status in ("succeeded", "failed", "cancelled"):
            break
        time.sleep(0.3)
    assert status == "succeeded"  # bob's cancel did not touch it
    admin = httpx.get(f"{url}/v1/jobs/{job_id}", headers=auth(OPS), timeout=30)
    assert admin.status_code == 200 and admin.json()["status"] == "succeeded"
    result = httpx.get(f"{url}/v1/jobs/{job_id}/result", headers=auth(ALICE), timeout=30)
    assert result.status_code == 200 and result.json()["choices"]


def test_stored_responses_are_readable_only_by_their_key_or_an_admin(observed: Observed) -> None:
    url = observed.stack.url
    request = {"model": MODEL, "input": "Say hi.", "max_output_tokens": 8, "store": True, "background": True}
    created = httpx.post(f"{url}/v1/responses", json=request, headers=auth(ALICE), timeout=60)
    assert created.status_code == 200, created.text
    response_id = created.json()["id"]
    deadline = time.monotonic() + 120
    status = ""
    while time.monotonic() < deadline:
        status = httpx.get(f"{url}/v1/responses/{response_id}", headers=auth(ALICE), timeout=30).json()["status"]
        if status not in ("queued", "in_progress"):
            break
        time.sleep(0.3)
    assert status in ("completed", "incomplete")  # finished (incomplete: it hit max_output_tokens)
    assert httpx.get(f"{url}/v1/responses/{response_id}", headers=auth(BOB), timeout=30).status_code == 404
    assert httpx.delete(f"{url}/v1/responses/{response_id}", headers=auth(BOB), timeout=30).status_code == 404
    admin = httpx.get(f"{url}/v1/responses/{response_id}", headers=auth(OPS), timeout=30)
    assert admin.status_code == 200 and admin.json()["status"] == status
    assert httpx.get(f"{url}/v1/responses/{response_id}", headers=auth(ALICE), timeout=30).status_code == 200


# --------------------------------------------------------------------------------------- the viewer


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed (make system)")
def test_trace_viewer_works_with_keys_kept_in_session_storage(observed: Observed, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    url = observed.stack.url
    body = _complete(url, CODE_REQUEST, ALICE)
    trace_id = body["ttc"]["trace_id"]
    errors: list[str] = []
    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--disable-quic"], headless=True
        )
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url) if "/v1/" in r.url else None)
        # An old link with ?key=: the page must not use it, and must take it out of the address bar.
        page.goto(f"{url}/ui/traces/{trace_id}?key={BOB}")
        page.wait_for_function("document.getElementById('status').className === 'error'", timeout=15_000)
        assert "needs an API key" in page.inner_text("#status")
        assert "key=" not in page.url
        assert page.locator("#tree circle").count() == 0

        # The wrong key (another caller's) reads nothing.
        page.fill("#key-input", BOB)
        page.click("#key-use")
        page.wait_for_function(
            "document.getElementById('status').textContent.includes('could not load')", timeout=15_000
        )
        assert page.locator("#tree circle").count() == 0

        page.click("#key-forget")
        assert page.evaluate("sessionStorage.getItem('ttc-api-key')") is None
        page.fill("#key-input", ALICE)
        page.click("#key-use")
        page.wait_for_selector("#tree circle", timeout=15_000)
        assert page.evaluate("sessionStorage.getItem('ttc-api-key')") == ALICE
        assert page.input_value("#key-input") == ""  # not left in the form
        circles = page.locator("#tree circle").count()
        assert circles == len(httpx.get(f"{url}/v1/traces/{trace_id}", headers=auth(ALICE), timeout=30).json()["nodes"])
        assert page.inner_text("#strategy") == "best_of_n"
        page.locator("#tree .node").nth(1).dispatch_event("click")
        page.wait_for_selector("#detail pre")
        page.screenshot(path=str(tmp_path / "trace-viewer.png"), full_page=True)

        # A reload in the same tab keeps the key (session storage); a new tab's context does not.
        page.reload()
        page.wait_for_selector("#tree circle", timeout=15_000)
        fresh = browser.new_page()
        fresh.goto(f"{url}/ui/traces/{trace_id}")
        fresh.wait_for_function("document.getElementById('status').className === 'error'", timeout=15_000)
        browser.close()
    assert errors == []
    assert any(f"/v1/traces/{trace_id}" in r for r in requests)
    assert not [r for r in requests if ALICE in r or BOB in r], "a key went into an API URL"
    assert (tmp_path / "trace-viewer.png").stat().st_size > 10_000
    shots = os.environ.get("TTC_SCREENSHOT_DIR")  # docs/img/trace-viewer.png is made this way
    if shots:
        shutil.copy(tmp_path / "trace-viewer.png", Path(shots) / "trace-viewer.png")


# ------------------------------------------------------------------------------------------ metrics

# Series that only an event moves, each with the test that produces the event and asserts it.
CANCEL_TEST = "tests/e2e/test_open_paths.py::test_cancelling_a_running_job_stops_the_engine"
EVENT_ONLY: dict[str, str] = {
    "ttc_gateway_shed_total": "tests/e2e/test_open_paths.py::test_kv_utilization_sheds_with_429_and_retry_after",
    "ttc_gateway_effort_degradations_total": "tests/e2e/test_open_paths.py::test_high_kv_utilization_degrades_effort",
    "ttc_gateway_cancellations_total": CANCEL_TEST,
    "ttc_orchestrator_cancellations_total": CANCEL_TEST,
    "ttc_policy_aborted_requests_total": CANCEL_TEST,
    "ttc_policy_aborted_tokens_total": CANCEL_TEST,
    # Only a policy restart makes a worker retry (the short chaos run restarts it and reads the counter).
    "ttc_orchestrator_policy_retries_total": "tests/e2e/test_chaos.py::test_short_chaos_run_meets_the_targets",
    "ttc_errors_total": "tests/e2e/test_verifier_code.py",
    "ttc_sandbox_kills_total": "tests/e2e/test_sandbox_service.py",
    "ttc_sandbox_rejected_total": "tests/e2e/test_sandbox_service.py",
    # The batching engine admits a whole search at once; requests queue only past its limit.
    "ttc_policy_requests_waiting": "tests/e2e/test_policy_llamacpp_batching.py::"
    "test_requests_beyond_the_parallel_limit_wait_and_the_gauge_shows_it",
}


def redeliver(stack: GatewayStack, job_id: str) -> None:
    """Deliver a finished job's message again, as an at-least-once broker does after a lost ack:
    the worker must skip it (its result exists) and count the redelivery."""
    from services.gen.ttc.v1 import orchestrator_pb2
    from services.jobs import events as ev
    from services.jobs.celery_app import make_celery

    worker_metrics = f"http://127.0.0.1:{stack.worker_metrics_ports[0]}/metrics"

    def skipped() -> float:
        return stack.metric(worker_metrics, "ttc_orchestrator_redeliveries_total", action="skipped")

    # Counted per action: a "deferred" redelivery earlier in the run must not hide this one.
    before = skipped()
    celery = make_celery(stack.redis.url, stack.queue, 8)
    payload = ev.encode_job(orchestrator_pb2.SearchJob(job_id=job_id, model=MODEL))
    celery.send_task(ev.SEARCH_TASK, args=[payload], queue=stack.queue)
    try:
        # Generous: on a loaded CI host the worker may still be finishing the searches' tails.
        stack.wait_for(lambda: skipped() > before, timeout=90, what="the redelivered job to be skipped")
    except TimeoutError as exc:
        tail = stack.workers[0].log_path.read_text(errors="replace")[-3000:]
        raise TimeoutError(f"{exc}; queue length {stack.queue_length()}; worker log tail:\n{tail}") from exc


@dataclass
class Scrapes:
    """Every family each service exports, and the largest absolute value any of its samples took."""

    families: dict[str, set[str]] = field(default_factory=dict)  # service -> family names
    peak: dict[str, float] = field(default_factory=dict)
    labels: dict[str, set[str]] = field(default_factory=dict)

    def scrape(self, urls: dict[str, str]) -> None:
        for service, url in urls.items():
            try:
                text = httpx.get(url, timeout=5).text
            except httpx.HTTPError:
                continue
            for family in text_string_to_metric_families(text):
                # ``_created`` (a counter's creation time) is prometheus_client's own, not a series we set.
                if not family.name.startswith("ttc_") or family.name.endswith("_created"):
                    continue
                key = family.name + "_total" if family.type == "counter" else family.name
                self.families.setdefault(service, set()).add(key)
                for sample in family.samples:
                    if sample.name.endswith("_created"):
                        continue
                    self.peak[key] = max(self.peak.get(key, 0.0), abs(float(sample.value)))
                    self.labels.setdefault(key, set()).update(sample.labels)


#: gauges only a busy engine sets, read from its stats now and then (the gateway polls them
#: every 0.5 s): sampled while a decode lasts, not while the short requests below happen to run
ENGINE_GAUGES = ("ttc_kv_cache_utilization", "ttc_gateway_engine_kv_utilization", "ttc_policy_requests_running")


def _hold_the_engine_until_sampled(observed: Observed, scrapes: Scrapes) -> None:
    """Keep the engine decoding (a greedy count cannot end before its 3000 tokens) until the
    scrapes have seen its gauges move, however fast this host decodes; then cancel that job."""
    url = observed.stack.url
    body = {
        "model": MODEL,
        "prompt": COUNTING_PROMPT,
        "max_tokens": 3000,
        "temperature": 0,
        "reasoning_effort": "none",
        "background": True,
    }
    created = httpx.post(f"{url}/v1/completions", json=body, headers=auth(ALICE), timeout=60)
    assert created.status_code == 202, created.text
    try:
        observed.stack.wait_for(
            lambda: all(scrapes.peak.get(name, 0.0) > 0 for name in ENGINE_GAUGES),
            timeout=120,
            what=f"the scrapes to see {ENGINE_GAUGES} move",
        )
    finally:
        httpx.post(f"{url}/v1/jobs/{created.json()['id']}/cancel", headers=auth(ALICE), timeout=30)


def test_every_exported_series_moves_under_real_requests(observed: Observed) -> None:
    scrapes = Scrapes()
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            scrapes.scrape(observed.metric_urls)
            time.sleep(0.15)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    url = observed.stack.url
    try:
        _hold_the_engine_until_sampled(observed, scrapes)
        # Two searches at once: one waits for the engine while the other decodes.
        # The slow request's tests sleep, so its candidates' runs hold both sandbox slots and queue
        # (five: with three, a draw where SmolLM2 wrote code for only two left no queue, seen in CI).
        judged = {**CODE_REQUEST, "ttc": {"strategy": "best_of_n", "n": 2, "verifier": "orm"}}
        slow_tests = {
            "tests": [{"name": "slow", "check_code": "import time\ntime.sleep(1.5)\nassert add(2, 3) == 5"}],
            "entry_point": "add",
        }
        slow = {**CODE_REQUEST, "ttc": {**CODE_REQUEST["ttc"], "n": 5, "params": {"code": slow_tests}}}  # type: ignore[dict-item]
        # Three quick background jobs first: with two worker slots one waits in the queue, so the
        # admissions below see a queue (ttc_gateway_queue_depth).
        quick = {**CODE_REQUEST, "ttc": {"strategy": "single", "n": 1}, "max_tokens": 8, "background": True}
        for _ in range(3):
            queued = httpx.post(f"{url}/v1/chat/completions", json=quick, headers=auth(BOB), timeout=60)
            assert queued.status_code == 202, queued.text
        bodies: list[dict[str, Any]] = []
        threads = [threading.Thread(target=lambda b=b: bodies.append(_complete(url, b, ALICE))) for b in (slow, judged)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        assert len(bodies) == 2
        redeliver(observed.stack, bodies[0]["ttc"]["trace_id"])
        streamed = {**CODE_REQUEST, "ttc": {"strategy": "single", "n": 1}, "stream": True, "max_tokens": 24}
        with httpx.stream(
            "POST", f"{url}/v1/chat/completions", json=streamed, headers=auth(ALICE), timeout=300
        ) as reply:
            assert reply.status_code == 200
            assert any("[DONE]" in line for line in reply.iter_lines())
        time.sleep(1.0)  # one more stats poll and scrape after the last request
    finally:
        stop.set()
        poller.join(10)
    scrapes.scrape(observed.metric_urls)
    for service in observed.metric_urls:
        assert scrapes.families.get(service), f"{service} exported no ttc_ families"

    exported = set().union(*scrapes.families.values())
    moved = {name for name in exported if scrapes.peak.get(name, 0.0) > 0}
    print("event-only series that also moved here:", sorted(moved & set(EVENT_ONLY)))
    still = sorted(exported - moved - set(EVENT_ONLY))
    assert not still, f"exported series that nothing set under real requests and no event test covers: {still}"
    assert "ttc_gateway_engine_kv_utilization" in moved  # polled from the policy's GetStats
    assert "ttc_kv_cache_utilization" in moved
    root = Path(__file__).resolve().parents[2]
    for name, where in EVENT_ONLY.items():
        path, _, test = where.partition("::")
        source = (root / path).read_text()
        assert name in source, f"{where} does not assert {name}"
        assert not test or f"def {test}(" in source, f"{where} does not exist"


def test_dashboard_queries_only_name_series_and_labels_that_exist(observed: Observed) -> None:
    """Every ``ttc_`` series a Grafana panel queries is one a running service exports, and every
    label the query filters or groups on is one of that series' labels."""
    import re
    import sys

    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "scripts"))
    import grafana_dashboard

    scrapes = Scrapes()
    _complete(observed.stack.url, {**CODE_REQUEST, "ttc": {"strategy": "single", "n": 1}, "max_tokens": 8}, ALICE)
    scrapes.scrape(observed.metric_urls)
    exported = set().union(*scrapes.families.values())
    problems = []
    for expr in grafana_dashboard.expressions():
        for match in re.finditer(r"\b(ttc_[a-z0-9_]+)(\{[^}]*\})?", expr):
            name = re.sub(r"_(bucket|sum|count)$", "", match.group(1))
            if name not in exported:
                problems.append(f"{expr}: {name} is not exported by any service")
                continue
            labels = set(re.findall(r"(\w+)\s*=~?", match.group(2) or ""))
            known = scrapes.labels.get(name, set()) | {"le"}
            if name in scrapes.labels and not labels <= known:
                problems.append(f"{expr}: {name} has no label {sorted(labels - known)}")
        names = {re.sub(r"_(bucket|sum|count)$", "", n) for n in re.findall(r"\b(ttc_[a-z0-9_]+)", expr)}
        if not all(n in scrapes.labels for n in names):
            continue  # an event-only series with no sample yet: its labels are checked where the event is
        have = set().union(*(scrapes.labels[n] for n in names)) | {"le"}
        for group in re.findall(r"by \(([^)]*)\)", expr):
            wanted = {g.strip() for g in group.split(",") if g.strip()}
            if names and not wanted <= have:
                problems.append(f"{expr}: grouped by {sorted(wanted - have)}, which no series in it carries")
    assert not problems, "\n".join(problems)

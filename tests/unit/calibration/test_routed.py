"""``python -m calibration routed``: records from scripted gateway replies, resume after an interruption."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from calibration.lib.records import LiveRunError, read_records
from calibration.verbs import routed
from calibration.verbs.routed import RoutedRun, to_record
from evaluation.heldout.routed_plan import PlannedRequest, pending
from evaluation.pools.store import ProblemPool
from loadtests.client import Reply
from tests.unit.calibration.graders import no_code_grader
from tests.unit.evaluation.pool_fixtures import draw, pool

SC4 = {"strategy": "self_consistency", "n": 4, "token_budget": 256, "params": {}}
REQ = PlannedRequest("p1", "low", ("low", "medium"), SC4)


def _record(*args: Any) -> dict[str, Any]:
    """``to_record`` run to its end, grading code with no sandbox (these replies are not code)."""
    return asyncio.run(to_record(*args, no_code_grader()))


def _pool(pid: str = "p1") -> ProblemPool:
    return pool(pid, cot=draw("cot", ("1", True), [("1", True)] * 3))


def _reply(text: str = "The answer is 1.", **ext: Any) -> Reply:
    base = {"strategy": "self_consistency", "n": 4, "effort_applied": "low", "termination": "completed",
            "confidence": 0.8}  # fmt: skip
    return Reply(text=text, prompt_tokens=30, completion_tokens=12, latency_s=0.5, ext=base | ext)


def test_a_routed_reply_is_checked_and_stands_for_its_efforts() -> None:
    right = _record(_pool(), REQ, 7, _reply())
    assert right["correct"] is True and right["efforts"] == ["low", "medium"] and right["confidence"] == 0.8
    assert _record(_pool(), REQ, 7, _reply("The answer is 2."))["correct"] is False


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (Reply(error="APITimeoutError: timed out", error_kind="timeout"), "timeout"),
        (_reply(strategy="single", n=1), "route"),
        (_reply(effort_applied="minimal"), "route"),
        (_reply(text="", termination="deadline"), "termination"),
    ],
)
def test_failures_and_misroutes_are_errors_not_verdicts(reply: Reply, kind: str) -> None:
    record = _record(_pool(), REQ, 0, reply)
    assert record["correct"] is None and record["error"] and record["error_kind"] == kind


def test_an_interrupted_run_keeps_what_it_sent_and_resumes_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pools = [_pool(f"p{i}") for i in range(3)]
    plan = [PlannedRequest(p.id, "low", ("low", "medium"), SC4) for p in pools]
    run = RoutedRun(model="m", pools_dir=tmp_path, out=tmp_path / "out", base_url="http://x/v1", chunk_size=1)
    run._url = "http://x/v1"
    monkeypatch.setattr(run, "table", lambda: (SimpleNamespace(provenance={}), tmp_path / "routing.m.json"))
    monkeypatch.setattr(run, "plan", lambda table: (pools, plan))
    monkeypatch.setattr(routed, "pool_settings", lambda d, s: ({"temperature": 0.0, "cot_max_tokens": 64}, "sha"))
    monkeypatch.setattr(routed, "model_sha256", lambda m: "sha")
    monkeypatch.setattr(routed, "provenance_hash", lambda p: "table-1")
    calls: list[dict[str, Any]] = []
    resumed = False

    async def send(client: Any, kwargs: dict[str, Any], *, stream: bool) -> Reply:
        calls.append(kwargs)
        if len(calls) == 2 and not resumed:
            raise SystemExit(143)  # SIGTERM mid-chunk (the handler exits)
        return _reply()

    monkeypatch.setattr(routed, "send", send)
    with pytest.raises(SystemExit):
        asyncio.run(run.run())
    records, headers, seq = read_records(tmp_path / "out")
    assert [r["problem_id"] for r in records] == ["p0"] and seq == 2
    assert headers[0]["settings"]["table_provenance"] == "table-1"
    assert calls[0]["reasoning_effort"] == "low" and "extra_body" not in calls[0]  # no ttc pin: the gateway routes
    assert (calls[0]["temperature"], calls[0]["max_tokens"]) == (0.0, 64)
    assert [r.problem_id for r in pending(plan, records)] == ["p1", "p2"]
    calls.clear()
    resumed = True
    asyncio.run(run.run())
    assert [c["messages"][-1]["content"] for c in calls] == [str(p.problem["question"]) for p in pools[1:]]
    assert pending(plan, read_records(tmp_path / "out")[0]) == []


def test_a_running_gateway_must_serve_the_tables_provenance(monkeypatch: pytest.MonkeyPatch) -> None:
    served: dict[str, Any] = {"table": {"provenance": {"problems": 65, "fitted_by": "v1"}}}
    asked: list[str] = []

    def get(url: str, timeout: float) -> SimpleNamespace:
        asked.append(url)
        return SimpleNamespace(json=lambda: served)

    monkeypatch.setattr("httpx.get", get)
    table: Any = SimpleNamespace(provenance={"fitted_by": "v1", "problems": 65})
    run = RoutedRun(model="m", pools_dir=Path("."), out=Path("."), base_url="http://gw/v1/")
    assert run._gateway(Path("routing.m.json"), table) == "http://gw/v1"
    assert asked == ["http://gw/v1/models/m/ladder"]
    other = RoutedRun(model="m", pools_dir=Path("."), out=Path("."), base_url="http://gw/v1")
    with pytest.raises(LiveRunError, match="another table"):
        other._gateway(Path("routing.m.json"), SimpleNamespace(provenance={"problems": 66}))  # type: ignore[arg-type]


def test_a_served_table_is_priced_offline_only_when_fitted_on_these_pools(tmp_path: Path) -> None:
    from services.gateway.routing import RoutingTable

    base = RoutingTable.model_validate_json((routed.ROOT / "services/gateway/routing/routing.v1.json").read_text())
    shipped = base.model_copy(update={"provenance": {"pools": "docs/data/calibration/pools/m"}})
    assert routed.fitted_on(shipped, routed.ROOT / "docs/data/calibration/pools/m")
    assert not routed.fitted_on(shipped, tmp_path)
    assert not routed.fitted_on(base.model_copy(update={"provenance": {}}), tmp_path)  # named no pools


def _scripted(
    run: RoutedRun,
    pools: list[ProblemPool],
    plan: list[PlannedRequest],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    table: str,
    temperature: float = 0.0,
) -> list[dict[str, Any]]:
    """``run`` against a scripted gateway: the table's provenance hashes to ``table``; returns the calls."""
    run._url = "http://x/v1"
    monkeypatch.setattr(run, "table", lambda: (SimpleNamespace(provenance={}), tmp_path / f"{table}.json"))
    monkeypatch.setattr(run, "plan", lambda t: (pools, plan))
    monkeypatch.setattr(
        routed, "pool_settings", lambda d, s: ({"temperature": temperature, "cot_max_tokens": 64}, "sha")
    )
    monkeypatch.setattr(routed, "model_sha256", lambda m: "sha")
    monkeypatch.setattr(routed, "provenance_hash", lambda p: table)
    calls: list[dict[str, Any]] = []

    async def send(client: Any, kwargs: dict[str, Any], *, stream: bool) -> Reply:
        calls.append(kwargs)
        return _reply()

    monkeypatch.setattr(routed, "send", send)
    asyncio.run(run.run())
    return calls


def test_a_run_adopts_another_runs_records_where_its_table_routes_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pools = [_pool(f"p{i}") for i in range(2)]
    old_plan = [PlannedRequest(p.id, "low", ("low", "medium"), SC4) for p in pools]
    old = RoutedRun(model="m", pools_dir=tmp_path, out=tmp_path / "old", base_url="http://x/v1")
    assert len(_scripted(old, pools, old_plan, tmp_path, monkeypatch, "shipped")) == 2
    cascade = {"strategy": "cascade", "n": 4, "token_budget": 256, "params": {}}
    new_plan = [PlannedRequest("p0", "low", ("low", "medium"), SC4), PlannedRequest("p1", "low", ("low",), SC4),
                PlannedRequest("p1", "medium", ("medium",), cascade)]  # fmt: skip
    new = RoutedRun(model="m", pools_dir=tmp_path, out=tmp_path / "new", base_url="http://x/v1", reuse=tmp_path / "old")
    calls = _scripted(new, pools, new_plan, tmp_path, monkeypatch, "escalation")
    assert [(c["messages"][-1]["content"], c["reasoning_effort"]) for c in calls] == [
        (str(pools[1].problem["question"]), "medium")]  # fmt: skip  # only the cascade route is sent
    records, headers, _ = read_records(tmp_path / "new")
    assert headers[0]["adopted_from"]["dir"] == str(tmp_path / "old")
    assert sorted((r["problem_id"], tuple(r["efforts"]), bool(r.get("adopted_from"))) for r in records) == [
        ("p0", ("low", "medium"), True), ("p1", ("low",), True), ("p1", ("medium",), False)]  # fmt: skip
    assert pending(new_plan, records) == []


def test_records_of_other_requests_are_never_adopted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pools = [_pool("p0")]
    plan = [PlannedRequest("p0", "low", ("low",), SC4)]
    _scripted(RoutedRun(model="m", pools_dir=tmp_path, out=tmp_path / "old", base_url="http://x/v1"), pools, plan,
              tmp_path, monkeypatch, "shipped", temperature=0.7)  # fmt: skip
    new = RoutedRun(model="m", pools_dir=tmp_path, out=tmp_path / "new", base_url="http://x/v1", reuse=tmp_path / "old")
    with pytest.raises(LiveRunError, match="sent other requests"):
        _scripted(new, pools, plan, tmp_path, monkeypatch, "escalation", temperature=0.0)


def test_the_command_line_names_the_run_to_reuse() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    routed.add_arguments(parser)
    assert parser.parse_args(["--reuse", "routed/old"]).reuse == Path("routed/old")

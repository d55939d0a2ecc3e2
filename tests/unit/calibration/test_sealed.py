"""``python -m calibration sealed``: scripted gateway replies (no model), a run stopped mid-chunk
and resumed, a failure sent once more, a tampered split or another table refused."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from calibration.lib.records import LiveRunError, read_records
from calibration.verbs import sealed
from calibration.verbs.sealed import SealedRun, to_record
from evaluation.problems.sealed import SealedProblem, load_sealed, text_hash
from loadtests.client import Reply

CARD_TABLE = {"sha256": "t" * 64, "path": "services/gateway/routing/routing.m.json"}


def split_file(tmp_path: Path, per_family: int = 2, tamper: bool = False) -> tuple[Path, list[SealedProblem]]:
    """A small split of committed problems (two families), with its hash list."""
    problems = [
        p for f in ("simple_geometry", "acre") for p in [q for q in load_sealed() if q.family == f][:per_family]
    ]
    hashes = sorted(text_hash(p.question) for p in problems)
    if tamper:
        problems[0] = SealedProblem(**(problems[0].to_json() | {"question": problems[0].question + " (edited)"}))
    path = tmp_path / "split.json"
    path.write_text(json.dumps({"question_sha256": hashes, "problems": [p.to_json() for p in problems]}))
    return path, problems


def reply(text: str, **ext: Any) -> Reply:
    base = {"strategy": "self_consistency", "n": 4, "candidates_generated": 3, "task_type": "arithmetic",
            "effort_applied": "high", "termination": "completed", "confidence": 0.8}  # fmt: skip
    return Reply(text=text, prompt_tokens=30, completion_tokens=12, latency_s=0.5, ext=base | ext)


def fake_gateway(monkeypatch: pytest.MonkeyPatch, table: dict[str, Any]) -> None:
    monkeypatch.setattr("httpx.get", lambda url, timeout: SimpleNamespace(json=lambda: {"table": table}))
    monkeypatch.setattr(sealed, "model_sha256", lambda m: "m" * 64)


def new_run(split: Path, out: Path, **kw: Any) -> SealedRun:
    return SealedRun(model="m", pools_dir=split, out=out, run_id=out.name, base_url="http://gw/v1",
                     efforts=("low", "high"), chunk_size=1, **kw)  # fmt: skip


def test_a_reply_is_graded_by_the_generators_checker_and_keeps_its_ttc_object() -> None:
    p = next(q for q in load_sealed() if q.family == "simple_geometry")
    right = to_record(p, "high", reply(f"The answer is {p.reference}.", first_wave={"size": 3, "agreed": True}))
    assert right["correct"] is True and right["grade"] == 1.0 and right["candidates"] == 3
    assert right["task_kind"] == "arithmetic" and right["ttc"]["first_wave"] == {"size": 3, "agreed": True}
    wrong = to_record(p, "high", reply("The answer is -1."))
    assert wrong["correct"] is False and wrong["grade"] == 0.0 and wrong["content"] == "The answer is -1."


def test_an_infrastructure_failure_is_recorded_never_graded() -> None:
    p = load_sealed()[0]
    failed = to_record(p, "low", Reply(error="APIConnectionError: refused", error_kind="connection"), "timeout")
    assert failed["grade"] is None and failed["correct"] is None and failed["error_kind"] == "connection"
    assert failed["attempts"] == 2 and failed["retried_after"] == "timeout"
    ended = to_record(p, "low", reply("", termination="deadline"))
    assert ended["correct"] is None and ended["error_kind"] == "termination"


def test_a_stopped_run_keeps_its_chunks_and_resumes_with_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    split, problems = split_file(tmp_path)
    fake_gateway(monkeypatch, CARD_TABLE)
    by_question = {p.question: p for p in problems}
    calls: list[dict[str, Any]] = []
    stop_at: int | None = 4

    async def send(client: Any, kwargs: dict[str, Any], *, stream: bool) -> Reply:
        calls.append(kwargs)
        if len(calls) == stop_at:
            raise SystemExit(143)  # SIGTERM in the second chunk's first request
        if len(calls) == 2 and stop_at is not None:
            return Reply(error="APITimeoutError: timed out", error_kind="timeout")  # sent once more
        return reply(by_question[kwargs["messages"][0]["content"]].reference)

    monkeypatch.setattr(sealed, "send", send)
    out = tmp_path / "runs" / "r1"
    with pytest.raises(SystemExit):
        asyncio.run(new_run(split, out).run())
    records, headers, seq = read_records(out)
    assert [(r["effort"], r["attempts"], r["correct"]) for r in records] == [("low", 1, True), ("high", 2, True)]
    assert calls[0] == {"model": "m", "messages": [{"role": "user", "content": calls[0]["messages"][0]["content"]}],
                        "reasoning_effort": "low"}  # fmt: skip
    header = headers[0]
    assert header["table_sha256"] == "t" * 64 and header["model_sha256"] == "m" * 64 and seq == 2
    assert header["started_at"] <= header["ended_at"] and len(header["load_average_start"]) == 3
    assert header["git_describe"] and header["efforts"] == ["low", "high"]
    families = [r["family"] for r in records]
    calls.clear()
    stop_at = None
    asyncio.run(new_run(split, out).run())
    records = read_records(out)[0]
    assert len(records) == 8 and len({(r["problem_id"], r["effort"]) for r in records}) == 8
    assert len(calls) == 6 and all(r["correct"] for r in records)
    assert families == ["simple_geometry"] * 2 and records[2]["family"] == "acre"  # round-robin over families


def test_a_tampered_split_is_refused_before_anything_is_sent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    split, _ = split_file(tmp_path, tamper=True)
    fake_gateway(monkeypatch, CARD_TABLE)
    sent: list[Any] = []

    async def send(client: Any, kwargs: dict[str, Any], *, stream: bool) -> Reply:
        sent.append(kwargs)
        return reply("")

    monkeypatch.setattr(sealed, "send", send)
    with pytest.raises(LiveRunError, match="not the committed split"):
        asyncio.run(new_run(split, tmp_path / "out").run())
    assert sent == [] and not (tmp_path / "out").exists()


def test_a_resumed_run_refuses_a_gateway_serving_another_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    split, problems = split_file(tmp_path, per_family=1)
    fake_gateway(monkeypatch, CARD_TABLE)

    async def send(client: Any, kwargs: dict[str, Any], *, stream: bool) -> Reply:
        return reply(problems[0].reference)

    monkeypatch.setattr(sealed, "send", send)
    out = tmp_path / "runs" / "r1"
    asyncio.run(new_run(split, out, retry_errors=True).run())
    assert len(read_records(out)[0]) == 4
    fake_gateway(monkeypatch, CARD_TABLE | {"sha256": "u" * 64})
    monkeypatch.setattr("calibration.verbs.sealed.pending", lambda *a, **k: [(problems[0], "low")])
    with pytest.raises(LiveRunError, match="start a new run"):
        asyncio.run(new_run(split, out).run())
    monkeypatch.setattr(sealed, "model_sha256", lambda m: "x" * 64)
    with pytest.raises(LiveRunError, match="another model"):
        asyncio.run(new_run(split, out).run())


def test_the_command_line_refuses_to_reuse_or_invent_a_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sealed, "RUNS", tmp_path)
    (tmp_path / "taken").mkdir()
    args = sealed_args(["run", "--run-id", "taken"])
    assert args.efforts is None and sealed.run(args) == 2
    assert "--resume taken" in capsys.readouterr().err
    assert sealed.run(sealed_args(["run", "--resume", "absent"])) == 2
    assert sealed_args(["run", "--efforts", "high,none"]).efforts == ("none", "high")
    with pytest.raises(SystemExit):
        sealed_args(["run", "--efforts", "extreme"])


def test_reports_are_written_per_run_in_the_order_runs_started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    split, _ = split_file(tmp_path, per_family=1)
    fake_gateway(monkeypatch, CARD_TABLE)

    async def send(client: Any, kwargs: dict[str, Any], *, stream: bool) -> Reply:
        return reply("The answer is 0.")

    monkeypatch.setattr(sealed, "send", send)
    clock = iter(f"2026-12-08T10:00:{s:02d}Z" for s in range(60))
    monkeypatch.setattr(sealed, "utc_now", lambda: next(clock))
    runs = tmp_path / "runs"
    for name in ("zz-first", "aa-second"):
        asyncio.run(new_run(split, runs / name).run())
    assert [d.name for d in sealed.runs_in_order(runs)] == ["zz-first", "aa-second"]
    path, text = sealed.write_report(runs / "zz-first", split, tmp_path)
    body = json.loads(path.read_text())
    assert body["per_effort"]["high"]["answered"] == 2 and body["per_effort"]["high"]["accuracy"] == 0.0
    assert path.with_suffix(".md").read_text() == text and "Complete: every one of 4" in text


def sealed_args(argv: list[str]) -> Any:
    from calibration.cli import parser

    return parser().parse_args(["sealed", *argv])

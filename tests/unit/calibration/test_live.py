"""``python -m calibration live`` without a model: the stated subset (round-robin over families,
recorded in every chunk header), resume against a gateway that is down (errors recorded, never
verdicts), the report's table beside the priced configurations on the same subset, and the
records read back as the route fit takes them."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from calibration.lib.fit import live_set
from calibration.lib.pool_run import model_sha256
from calibration.lib.records import LiveRunError, read_records, write_records
from calibration.lib.validation import to_record
from calibration.verbs.live import LiveRun
from evaluation.pools.store import ProblemPool, write_chunk
from evaluation.pricing.live_configs import live_route
from loadtests.client import Reply
from tests.helpers.processes import free_port
from tests.unit.calibration.graders import no_code_grader
from tests.unit.evaluation.pool_fixtures import draw, pool

SETTINGS = {"temperature": 0.7, "top_p": 1.0, "cot_max_tokens": 64, "program_max_tokens": 64, "k": 3}
MODEL = "smollm2-135m"


def _record(*args: Any) -> dict[str, Any]:
    """``to_record`` run to its end, grading code with no sandbox (these replies are not code)."""
    return asyncio.run(to_record(*args, no_code_grader()))


def _pool(pid: str, family: str) -> ProblemPool:
    p = pool(pid, cot=draw("cot", ("1", True), [("1", True), ("2", False), ("1", True)]),
             program=draw("program", ("1", True), [("1", True)] * 3))  # fmt: skip
    return dataclasses.replace(p, family=family)


def _setup(tmp_path: Path) -> tuple[Path, Path]:
    pools_dir, out = tmp_path / "pools", tmp_path / "live"
    pools = [_pool("a1", "a"), _pool("a2", "a"), _pool("b1", "b"), _pool("c1", "c")]
    write_chunk(pools_dir, "calibration", 1, {"settings": SETTINGS, "model_sha256": model_sha256(MODEL)}, pools)
    return pools_dir, out


def test_the_subset_is_stated_in_every_chunk_and_a_down_gateway_resumes(tmp_path: Path) -> None:
    pools_dir, out = _setup(tmp_path)
    run = LiveRun(model=MODEL, split="calibration", pools_dir=pools_dir, out=out, configs=["beam@4", "revision@3"],
                  limit=3, base_url=f"http://127.0.0.1:{free_port()}/v1", chunk_size=1, timeout_s=5.0)  # fmt: skip
    assert asyncio.run(run.run()) == 6
    records, headers, _ = read_records(out)
    assert [r["problem_id"] for r in records] == ["a1", "a1", "b1", "b1", "c1", "c1"]
    assert all(h["settings"]["subset"]["ids"] == ["a1", "b1", "c1"] for h in headers) and len(headers) == 3
    assert headers[0]["settings"]["pins"]["beam@4"]["strategy"] == "beam_search"
    assert all(r["error_kind"] == "connection" and r["correct"] is None for r in records)
    assert run.write_report()["rows"] == []  # errors only: nothing measured, nothing counted wrong
    assert live_set(out) is None
    assert asyncio.run(run.run()) == 0  # resumed: every pair has a record
    run.retry_errors = True
    assert asyncio.run(run.run()) == 6
    run.configs = ["beam@5"]
    with pytest.raises(LiveRunError, match="not a live configuration"):
        asyncio.run(run.run())


def test_the_report_sets_live_rows_beside_priced_ones_on_the_same_subset(tmp_path: Path) -> None:
    pools_dir, out = _setup(tmp_path)
    run = LiveRun(model=MODEL, split="calibration", pools_dir=pools_dir, out=out, configs=["mcts@8"], limit=3)
    pin = run.prepare()[1]["mcts@8"][1]
    reply = Reply(text="The answer is 1.", prompt_tokens=30, completion_tokens=12, latency_s=0.5,
                  ext={"strategy": "mcts", "termination": "completed"})  # fmt: skip
    done = [_record(_pool(pid, fam), "mcts@8", pin, 0, reply) for pid, fam in (("a1", "a"), ("b1", "b"))]
    write_records(out, "calibration", 1, {"settings": run.settings_header(SETTINGS, run.prepare()[1])}, done)
    rows = {(r["group"], r["config"]): r for r in run.write_report()["rows"]}
    assert rows[("live subset: all", "mcts@8")]["problems"] == 2
    assert rows[("live subset: all", "mcts@8")]["accuracy"] == 1.0
    assert rows[("live subset: all", "sc@3")]["problems"] == 2  # the priced ones on the same two problems
    assert rows[("live subset: all", "cot_greedy")]["accuracy"] == 1.0
    live = live_set(out)
    assert live is not None and set(live.estimates["mcts@8"]) == {"a1", "b1"}
    assert live.routes["mcts@8"] == live_route("mcts@8", SETTINGS)


def test_the_table_command_shows_live_rows_on_their_subset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from calibration.cli import main

    pools_dir, out = _setup(tmp_path)
    run = LiveRun(model=MODEL, split="calibration", pools_dir=pools_dir, out=out, configs=["revision@3"], limit=1)
    configs = run.prepare()[1]
    reply = Reply(text="The answer is 2.", prompt_tokens=30, completion_tokens=12, latency_s=0.5,
                  ext={"strategy": "revision", "termination": "completed"})  # fmt: skip
    record = _record(_pool("a1", "a"), "revision@3", configs["revision@3"][1], 0, reply)
    write_records(out, "calibration", 1, {"settings": run.settings_header(SETTINGS, configs)}, [record])
    assert main(["table", "--out", str(pools_dir), "--live", str(out), "--configs", "revision@3,cot_greedy"]) == 0
    printed = capsys.readouterr().out
    assert "| live subset: all | `revision@3` | 1 | 0.000 |" in printed
    assert "| live subset: all | `cot_greedy` | 1 | 1.000 |" in printed
    assert "| all | `cot_greedy` | 4 | 1.000 |" in printed

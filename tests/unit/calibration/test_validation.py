"""``python -m calibration validate`` without a model: a reply becomes a record checked by the pools'
checker (infrastructure failures recorded as errors, never as wrong answers), record chunks
round-trip and refuse torn files, configurations are resolved or refused before anything is
sent, and only pools every configuration prices are chosen."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from calibration.lib.grading import CodeGrader
from calibration.lib.pool_run import model_sha256
from calibration.lib.records import LiveRunError, read_records, write_records
from calibration.lib.replies import regrade
from calibration.lib.validation import Validation, chosen_pools, pool_settings, resolve_configs, to_record
from evaluation.pools.store import ProblemPool, write_chunk
from evaluation.pricing.live_records import gateway_pin
from evaluation.pricing.pricer import Config
from loadtests.client import Reply
from tests.helpers.processes import free_port
from tests.unit.calibration.graders import no_code_grader
from tests.unit.evaluation.pool_fixtures import draw, pool

SETTINGS = {"temperature": 0.7, "top_p": 1.0, "cot_max_tokens": 64, "program_max_tokens": 64, "k": 3}
PIN = gateway_pin(Config("pot@1", "pot", 1), SETTINGS)


def _record(*args: Any) -> dict[str, Any]:
    """``to_record`` run to its end, grading code with no sandbox (these replies are not code)."""
    return asyncio.run(to_record(*args, no_code_grader()))


def _pool(pid: str = "p1") -> ProblemPool:
    return pool(
        pid, cot=draw("cot", ("1", True), [("1", True)] * 3), program=draw("program", ("1", True), [("1", True)] * 3)
    )


def _reply(text: str = "The answer is 1.", **ext: object) -> Reply:
    return Reply(text=text, prompt_tokens=30, completion_tokens=12, latency_s=0.5,
                 ext={"strategy": "program_of_thought", "termination": "completed", **ext})  # fmt: skip


def test_a_reply_is_checked_as_the_pools_check_answers() -> None:
    right = _record(_pool(), "pot@1", PIN, 7, _reply())
    assert right["correct"] is True and right["answer"] == "1" and not right["error"]
    assert (right["completion_tokens"], right["prompt_tokens"], right["seed"]) == (12, 30, 7)
    assert right["ttc"] == PIN.extension()
    wrong = _record(_pool(), "pot@1", PIN, 7, _reply("The answer is 2."))
    assert wrong["correct"] is False and not wrong["error"]


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (Reply(error="APITimeoutError: timed out", error_kind="timeout"), "timeout"),
        (Reply(text="", ext={"strategy": "program_of_thought", "termination": "deadline"}), "termination"),
        (Reply(text="The answer is 1.", ext={"strategy": "self_consistency"}), "strategy"),
    ],
)
def test_infrastructure_failures_are_errors_not_verdicts(reply: Reply, kind: str) -> None:
    record = _record(_pool(), "pot@1", PIN, 0, reply)
    assert record["correct"] is None and record["error"] and record["error_kind"] == kind


def test_record_chunks_round_trip_and_a_torn_chunk_is_refused(tmp_path: Path) -> None:
    assert read_records(tmp_path / "none") == ([], [], 1)
    write_records(tmp_path, "calibration", 1, {"model": "m"}, [{"problem_id": "a", "config": "pot@1"}])
    write_records(tmp_path, "calibration", 2, {"model": "m"}, [{"problem_id": "b", "config": "pot@1"}] * 2)
    records, headers, seq = read_records(tmp_path)
    assert [r["problem_id"] for r in records] == ["a", "b", "b"] and seq == 3
    assert [h["records"] for h in headers] == [1, 2] and headers[0]["model"] == "m"
    torn = tmp_path / "calibration-00003.jsonl"
    torn.write_text(json.dumps({"type": "header", "records": 2}) + "\n" + json.dumps({"problem_id": "c"}) + "\n")
    with pytest.raises(LiveRunError, match="not a whole validation chunk"):
        read_records(tmp_path)


def test_configurations_are_resolved_or_refused_before_anything_is_sent() -> None:
    chosen = resolve_configs(["pot@1", "sc@3"], 3, SETTINGS, 0.9)
    assert chosen["sc@3"][1].strategy == "self_consistency" and chosen["pot@1"][1] == PIN
    with pytest.raises(LiveRunError, match="not priced from pools of k=3"):
        resolve_configs(["sc@4"], 3, SETTINGS, 0.9)
    with pytest.raises(LiveRunError, match="no pinned gateway request"):
        resolve_configs(["code_vote@2"], 3, SETTINGS, 0.9)


def test_only_pools_every_configuration_prices_are_chosen(tmp_path: Path) -> None:
    code = pool("c1", kind="code", code=draw("code", ("x", True), [("x", True)] * 3))
    pools = [_pool("p1"), code, _pool("p2"), _pool("p3")]
    configs = [Config("pot@1", "pot", 1), Config("sc@3", "sc", 3)]
    assert [p.id for p in chosen_pools(pools, configs, 2)] == ["p1", "p2"]
    assert len(chosen_pools(pools, configs, 0)) == 3
    header = {"settings": SETTINGS, "model_sha256": "abc"}
    write_chunk(tmp_path, "calibration", 1, header, pools[:2])
    assert pool_settings(tmp_path, "calibration") == (SETTINGS, "abc")
    write_chunk(tmp_path, "calibration", 2, {**header, "settings": {**SETTINGS, "k": 8}}, pools[2:])
    with pytest.raises(LiveRunError, match="differ in draw settings"):
        pool_settings(tmp_path, "calibration")


def test_a_gateway_that_is_down_gives_infrastructure_errors_that_resume(tmp_path: Path) -> None:
    """The run loop against a port nothing listens on: every request is a connection error,
    recorded as such, excluded from the report (no verdict), not re-sent on resume unless
    asked."""
    pools_dir, out = tmp_path / "pools", tmp_path / "validation"
    header = {"settings": SETTINGS, "model_sha256": model_sha256("smollm2-135m")}
    write_chunk(pools_dir, "calibration", 1, header, [_pool("p1"), _pool("p2")])
    run = Validation(model="smollm2-135m", split="calibration", pools_dir=pools_dir, out=out, configs=["pot@1", "sc@3"],
                     base_url=f"http://127.0.0.1:{free_port()}/v1", chunk_size=1, timeout_s=5.0)  # fmt: skip
    assert asyncio.run(run.run()) == 4
    records, headers, _ = read_records(out)
    assert len(headers) == 2 and {h["model_sha256"] for h in headers} == {header["model_sha256"]}
    assert [(r["problem_id"], r["config"]) for r in records] == [("p1", "pot@1"), ("p1", "sc@3"), ("p2", "pot@1"),
                                                                   ("p2", "sc@3")]  # fmt: skip
    assert all(r["error_kind"] == "connection" and r["correct"] is None for r in records)
    body = run.write_report()
    assert [(c["config"], c["problems"], c["errors"], c["verdict"]) for c in body["checks"]] == [
        ("pot@1", 0, 2, "no data"),
        ("sc@3", 0, 2, "no data"),
    ]
    assert json.loads((out / "report.json").read_text())["provenance"]["records"] == 4
    assert asyncio.run(run.run()) == 0  # resumed: every pair has a record
    run.retry_errors = True
    assert asyncio.run(run.run()) == 4 and len(read_records(out)[0]) == 8
    run.configs = ["sc@4"]
    with pytest.raises(LiveRunError, match="not priced"):
        asyncio.run(run.run())


def test_the_cli_reports_from_records_and_refuses_a_config_it_cannot_map(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from calibration.cli import main

    pools_dir, out = tmp_path / "pools", tmp_path / "validation"
    write_chunk(pools_dir, "calibration", 1, {"settings": SETTINGS, "model_sha256": "x"}, [_pool("p1")])
    record = _record(_pool("p1"), "pot@1", PIN, 0, _reply())
    write_records(out, "calibration", 1, {"model_sha256": "x"}, [record])
    base = ["validate", "--model", "smollm2-135m", "--pools", str(pools_dir), "--out", str(out), "--report-only"]
    assert main([*base, "--configs", "pot@1"]) == 0
    printed = capsys.readouterr().out
    assert "| `pot@1` | 1 | 0 | 1.000" in printed and "agrees" in printed
    assert main([*base, "--configs", "code_pass@2"]) == 2
    assert "no pinned gateway request" in capsys.readouterr().err


def test_a_content_that_is_the_answer_in_its_asked_form_is_read_whole() -> None:
    """A list shaped as the question's example has no stated answer, and its last number is not
    the answer: the whole one-line content is. The content is kept for re-checking."""
    listed = _pool()
    listed.problem["reference"] = "['-13.0', '-8.0', '41.0']"
    record = _record(listed, "pot@1", PIN, 7, _reply("['-13.0', '-8.0', '41.0']"))
    assert record["correct"] is True and record["answer"] == "['-13.0', '-8.0', '41.0']"
    assert record["content"] == "['-13.0', '-8.0', '41.0']"
    assert _record(listed, "pot@1", PIN, 7, _reply("['-8.0', '-13.0', '41.0']"))["correct"] is False
    assert _record(_pool(), "pot@1", PIN, 7, _reply("The answer is 1."))["answer"] == "1"  # stated: unchanged


def _code_pool(pid: str = "h1") -> ProblemPool:
    coded = pool(pid, kind="code", cot=draw("cot", ("1", True), [("1", True)] * 3))
    coded.problem.update(check="code", reference="", extra={
        "entry_point": "add", "prompt": "import math\n\ndef add(a, b):\n    \"\"\"Sum.\"\"\"\n",
        "test": "def check(f):\n    assert f(1, 2) == 3\n",
    })  # fmt: skip
    return coded


class _Sandbox:
    """A scripted runner (the real sandbox is the e2e suites' and the run's): runs nothing, keeps
    what it was sent, passes a program that returns ``a + b``."""

    def __init__(self, fail: bool = False) -> None:
        self.sent: list[tuple[str, str]] = []
        self.fail = fail

    async def __call__(self, program: str, check: str) -> bool:
        if self.fail:
            raise RuntimeError("sandbox unreachable")
        self.sent.append((program, check))
        return "return a + b" in program


CODE_REPLY = "Here it is:\n```python\ndef add(a, b):\n    return a + b\n```\nIt returns 3 for 1 and 2."


def test_a_code_reply_is_graded_by_the_hidden_tests_not_by_its_last_number() -> None:
    sandbox = _Sandbox()
    record = asyncio.run(to_record(_code_pool(), "pot@1", PIN, 0, _reply(CODE_REPLY), CodeGrader(given=sandbox)))
    assert record["correct"] is True and record["content"] == CODE_REPLY and not record["error"]
    program, check = sandbox.sent[0]
    assert program.startswith("import math") and "def add(a, b):\n    return a + b" in program
    assert check.endswith("check(add)\n")  # the hidden tests, called on the entry point
    wrong = asyncio.run(
        to_record(_code_pool(), "pot@1", PIN, 0, _reply(CODE_REPLY.replace("a + b", "a - b")), CodeGrader(sandbox))
    )
    assert wrong["correct"] is False


def test_a_sandbox_that_cannot_grade_is_an_infrastructure_error() -> None:
    grader = CodeGrader(given=_Sandbox(fail=True))
    record = asyncio.run(to_record(_code_pool(), "pot@1", PIN, 0, _reply(CODE_REPLY), grader))
    assert record["correct"] is None and record["error_kind"] == "sandbox" and "unreachable" in record["error"]


def test_regrade_rechecks_kept_content_and_leaves_errors_and_old_records(tmp_path: Path) -> None:
    """Records graded by an older checker are re-checked from the content they kept; the chunk is
    rewritten whole and names the code that re-checked it."""
    pools = {"h1": _code_pool(), "p1": _pool()}
    misread = _record(pools["p1"], "pot@1", PIN, 0, _reply()) | {"problem_id": "h1", "content": CODE_REPLY,
                                                                 "correct": False, "answer": "2"}  # fmt: skip
    failed = _record(pools["p1"], "pot@1", PIN, 0, Reply(error="timed out", error_kind="timeout"))
    old = {k: v for k, v in _record(pools["p1"], "pot@1", PIN, 0, _reply()).items() if k != "content"}
    write_records(tmp_path, "heldout", 3, {"model": "m"}, [misread, failed, old])
    assert asyncio.run(regrade(tmp_path, pools, CodeGrader(given=_Sandbox()))) == 1
    records, headers, seq = read_records(tmp_path)
    assert [r["correct"] for r in records] == [True, None, True] and seq == 4
    assert records[1] == failed and records[2] == old
    assert headers[0]["model"] == "m" and headers[0]["regraded_by"]
    with pytest.raises(LiveRunError, match="could not be re-checked"):
        asyncio.run(regrade(tmp_path, pools, CodeGrader(given=_Sandbox(fail=True))))
    assert read_records(tmp_path)[0] == records  # untouched

"""``python -m calibration process`` on a hand-built pool folder over a scripted policy: records in
whole chunks with their provenance, a budget that stops and a resume that labels only what no
record holds, a folder of another run refused, and files valid against their schemas with no
development or sealed problem in them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from calibration.cli import main
from calibration.lib.records import read_records
from evaluation.pools.store import ProblemPool, write_chunk
from evaluation.problems.sealed import load_sealed
from evaluation.training.formats import PROCESS_FILES, schemas
from services.search.interfaces import Candidate, GenerateCall, Generation
from tests.unit.calibration.written_files import assert_valid_files, rows
from tests.unit.evaluation.training.fixtures import cot, problem_pool, side_id

HEADER = {"model": "m-small", "model_sha256": "ab" * 32, "settings": {"seed": 0, "cot_max_tokens": 200},
          "data": {"seed": 3}, "git_describe": "deadbee"}  # fmt: skip
DEVELOPMENT_Q = "Development: what is 19 + 23 when the two are added together?"
RIGHT = "We read the two numbers in the question.\nWe add them carefully to get 42.\nSo \\boxed{42}."
WRONG = "We read the two numbers in the question.\nWe add them carelessly to get 41.\nSo \\boxed{41}."


class Scripted:
    """Right from the first step, wrong after a careless sum; counts the calls."""

    def __init__(self) -> None:
        self.calls: list[GenerateCall] = []

    async def generate(self, call: GenerateCall, **_: Any) -> Generation:
        self.calls.append(call)
        text = "So \\boxed{41}." if call.assistant_prefix.endswith("41.\n") else "So \\boxed{42}."
        return Generation(tuple(Candidate(text, "stop", 5, seed) for seed in call.seeds), prompt_tokens=30)


def chains() -> list[Any]:
    return [cot(0, "42", True, text=RIGHT, tokens=40), cot(1, "41", False, text=WRONG, tokens=40)]


def pools_folder(root: Path) -> Path:
    sealed = load_sealed()[0]
    folder = root / "m-small"
    calibration: list[ProblemPool] = [
        problem_pool("What is 19 + 23? Add them.", "42", pid=side_id("calibration", "o"), cot=chains()),
        problem_pool("What is 20 + 22? Add them.", "42", pid=side_id("calibration", "q"), family="products",
                     cot=chains()),
        problem_pool(DEVELOPMENT_Q, "42", pid=side_id("calibration", "s"), cot=chains()),  # smuggled
        problem_pool(sealed.question, sealed.reference, pid=side_id("calibration", "z"), cot=chains()),
    ]  # fmt: skip
    write_chunk(folder, "calibration", 1, HEADER, calibration)
    development = problem_pool(DEVELOPMENT_Q, "42", pid=side_id("heldout", "d"), split="heldout", cot=chains())
    write_chunk(folder, "heldout", 1, HEADER, [development])
    return folder


@pytest.fixture
def policy(monkeypatch: pytest.MonkeyPatch) -> Scripted:
    scripted = Scripted()
    monkeypatch.setattr("calibration.verbs.process.policy_client", lambda target: scripted)
    return scripted


def process(folder: Path, out: Path, *extra: str) -> int:
    return main(["process", "--pools", str(folder), "--out", str(out), "--policy-target", "127.0.0.1:1", "--no-lock",
                 "--rollouts", "2", "--chunk-size", "1", *extra])  # fmt: skip


def ids(records: Sequence[dict[str, Any]]) -> list[str]:
    return [r["candidate_id"] for r in records]


def test_a_budgeted_run_resumes_with_what_no_record_holds(tmp_path: Path, policy: Scripted) -> None:
    folder, out = pools_folder(tmp_path / "pools"), tmp_path / "run"
    assert process(folder, out, "--max-candidates", "3") == 0
    records, headers, _ = read_records(out)
    assert len(records) == 3 and len(headers) == 3  # one candidate per chunk
    assert [r["family"] for r in records] == ["chain_sum", "chain_sum", "products"]  # families round-robin
    for header, record in zip(headers, records, strict=True):
        assert header["git_describe"] and header["model_sha256"] == "ab" * 32 and header["settings"]["rollouts"] == 2
        assert header["started_at"] <= header["ended_at"] and len(header["load_average_start"]) == 3
        assert header["generated_tokens"] == record["generated_tokens"] == 2 * 2 * 5
    assert len(policy.calls) == 6 and all(c.n == 2 and c.assistant_prefix for c in policy.calls)
    ends = [RIGHT.index("\n") + 1, RIGHT.index("42.\n") + 4]
    assert {c.max_tokens for c in policy.calls} == {200 - -(-40 * end // len(RIGHT)) for end in ends}  # cap - prefix

    assert process(folder, out) == 2  # records there and no --resume: refused
    assert process(folder, out, "--resume", "--rollouts", "3") == 2  # other settings: refused
    assert len(policy.calls) == 6

    assert process(folder, out, "--resume") == 0
    records, _, _ = read_records(out)
    assert len(records) == 4 and len(set(ids(records))) == 4  # nothing labelled twice
    assert len(policy.calls) == 8
    assert process(folder, out, "--resume") == 0 and len(policy.calls) == 8


def test_the_files_are_valid_and_hold_no_withheld_problem(tmp_path: Path, policy: Scripted) -> None:
    folder, out = pools_folder(tmp_path / "pools"), tmp_path / "run"
    assert process(folder, out) == 0
    files = schemas(PROCESS_FILES)
    assert_valid_files(out, files)
    text = (out / "process.jsonl").read_text() + "".join(p.read_text() for p in out.glob("process-*.jsonl"))
    assert DEVELOPMENT_Q not in text and json.dumps(load_sealed()[0].question)[1:-1] not in text
    labelled = rows(out / "process.jsonl")
    assert [(r["label"], [s["value"] for s in r["steps"]]) for r in labelled] == [
        (True, [1.0, 1.0]), (False, [1.0, 0.0]), (True, [1.0, 1.0]), (False, [1.0, 0.0]),
    ]  # fmt: skip
    manifest = json.loads((out / "process_manifest.json").read_text())
    assert manifest["left_out"] == {"problems: development_split": 2, "problems: sealed_split": 1}
    assert manifest["files"]["process.jsonl"]["by_label"] == {"right": 2, "wrong": 2}
    assert manifest["mean_value_by_position"] == {"right": [1.0, 1.0], "wrong": [1.0, 0.0]}
    assert manifest["model_sha256"] == "ab" * 32 and manifest["pool"]["models"] == ["m-small"]

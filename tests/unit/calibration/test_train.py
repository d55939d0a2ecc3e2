"""``python -m calibration train``: a training file with a development or sealed problem is
refused before any model is loaded, a merge waits for a finished run, and the report compares
two pool folders, paired, with the base's vote at the tuned model's tokens."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calibration.cli import main
from evaluation.pools.store import ProblemPool, write_chunk
from evaluation.problems.sealed import load_sealed
from tests.unit.evaluation.training.fixtures import cot, problem_pool, program, side_id

HEADER = {"model": "m", "model_sha256": "ab" * 32, "settings": {}}


def sft_line(question: str) -> str:
    messages = [{"role": "user", "content": question}, {"role": "assistant", "content": "\\boxed{1}"}]
    return json.dumps({"messages": messages, "prompt_id": side_id("calibration", "r"), "candidate_id": "c",
                       "source": "pool:m", "family": "chain_sum", "task_kind": "arithmetic", "modality": "cot",
                       "completion_tokens": 3})  # fmt: skip


def test_a_file_with_a_sealed_problem_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "sft.jsonl"
    data.write_text(sft_line("What is 1 + 0?") + "\n" + sft_line(load_sealed()[3].question) + "\n")
    code = main(["train", "--run-id", "test-refused-run", "--data", str(data), "--pools", str(tmp_path / "none")])
    assert code == 2 and "refused: 1 row(s)" in capsys.readouterr().out
    assert not Path("docs/data/training/runs/test-refused-run").exists()


def test_a_merge_needs_a_finished_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "merge", "no-such-run"]) == 2
    assert "holds no adapter" in capsys.readouterr().out


def pools(right: bool) -> list[ProblemPool]:
    """Four problems; the greedy program right or wrong, a right sampled one, three thoughts."""
    thoughts = [cot(0, "5", True, tokens=30), cot(1, "5", True, tokens=20), cot(2, "4", False, tokens=20)]
    made = []
    for i in range(4):
        greedy = program(0, "print(2 + 3)" if right else "print(2 + 2)", "5\n" if right else "4\n", right)
        programs = [greedy, program(1, "print(2 + 3)", "5\n", True)]
        made.append(problem_pool(f"What is 2 + 3, {i}?", "5", pid=f"p{i}", split="heldout", program=programs,
                                 cot=thoughts))  # fmt: skip
    return made


def test_the_report_pairs_the_tuned_model_with_the_base(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_chunk(tmp_path / "tuned", "heldout", 1, HEADER, pools(True))
    write_chunk(tmp_path / "base", "heldout", 1, HEADER, pools(False))
    out = tmp_path / "report.json"
    args = ["train", "report", "--split", "development", "--tuned", str(tmp_path / "tuned"),
            "--base", str(tmp_path / "base"), "--out", str(out)]  # fmt: skip
    assert main(args) == 0
    assert "| program greedy" in capsys.readouterr().out
    kinds = {k["kind"]: k for k in json.loads(out.read_text())["kinds"]}
    assert set(kinds) == {"program", "cot"}
    assert kinds["program"]["greedy"]["a"] == 1.0 and kinds["program"]["greedy"]["b"] == 0.0
    assert kinds["program"]["vote"]["n_low"] == 1 and kinds["cot"]["greedy"]["difference"] == 0.0


def test_the_served_check_refuses_a_tuned_model_not_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TTC_POLICY_MODELS_DIR", str(tmp_path))
    assert main(["train", "served", "qwen2.5-coder-0.5b-rft", "--out", str(tmp_path)]) == 2
    assert "train merge qwen2.5-coder-0.5b-rft" in capsys.readouterr().out
    assert not list(tmp_path.glob("served-*.json"))

"""``python -m calibration export`` on hand-built pool folders: the four files are written and
valid against the schemas the formats generate, the manifest records each pool's model hash and
seeds, no development or sealed problem is in any file, and served traces come only from the
opted-in keys' own traces even when the reader hands over another key's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from calibration.cli import main
from evaluation.pools.store import write_chunk
from evaluation.problems.sealed import load_sealed
from evaluation.training.formats import schemas
from tests.unit.calibration.written_files import assert_valid_files
from tests.unit.evaluation.training.fixtures import cot, problem_pool, program, side_id, trace

HEADER = {"model": "m-small", "model_sha256": "ab" * 32, "settings": {"seed": 0}, "data": {"seed": 3},
          "git_describe": "deadbee"}  # fmt: skip
DEVELOPMENT_Q = "Development: what is 19 + 23 when the two are added together?"
SERVED_Q = "What is 40 + 2 for the served user?"


def pools_folder(root: Path) -> Path:
    guess = program(1, "print(42)", "42\n", True)
    right = {
        "cot": [cot(0, "42", True), cot(1, "41", False)],
        "program": [program(0, "print(19 + 23)", "42\n", True), guess],
    }
    sealed = load_sealed()[0]
    folder = root / "m-small"
    write_chunk(folder, "calibration", 1, HEADER, [
        problem_pool("What is 19 + 23? Add them.", "42", pid=side_id("calibration", "o"), **right),
        problem_pool(SERVED_Q, "42", pid=side_id("calibration", "q"), **right),
        problem_pool(DEVELOPMENT_Q, "42", pid=side_id("calibration", "s"), **right),  # smuggled
        problem_pool(sealed.question, sealed.reference, pid=side_id("calibration", "z"), **right),
    ])  # fmt: skip
    write_chunk(folder, "heldout", 1, HEADER, [
        problem_pool(DEVELOPMENT_Q, "42", pid=side_id("heldout", "d"), split="heldout", **right),
    ])  # fmt: skip
    return folder


def test_export_writes_valid_files_without_withheld_problems(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = pools_folder(tmp_path / "pools")
    handed: dict[str, tuple[dict[str, Any], str]] = {
        "a1": (trace(SERVED_Q, "So \\boxed{42}."), "alice"),
        "b1": (trace(SERVED_Q, "Bob's private answer: \\boxed{42}."), "bob"),
    }
    asked: list[tuple[str, list[str]]] = []

    def reader(url: str, keys: list[str]) -> dict[str, tuple[dict[str, Any], str]]:
        asked.append((url, list(keys)))
        return handed  # a reader that wrongly hands over bob's trace too

    monkeypatch.setattr("calibration.verbs.export.read_opted_in", reader)
    out = tmp_path / "out"
    argv = ["export", "--pools", str(folder), "--out", str(out), "--redis-url", "redis://x", "--served-keys", "alice"]
    assert main(argv) == 0
    assert asked == [("redis://x", ["alice"])]

    files = schemas()
    assert_valid_files(out, files)

    text = "".join((out / name).read_text() for name in files)
    sealed = load_sealed()[0]
    assert DEVELOPMENT_Q not in text and json.dumps(sealed.question)[1:-1] not in text
    assert "Bob's private answer" not in text and "served/b1" not in text and "served/a1" in text
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["pools"][0] | {"path": ""} == {
        "path": "", "chunks": 2, "models": ["m-small"], "model_sha256": ["ab" * 32], "draw_seeds": [0],
        "data_seeds": [3], "drawn_by": ["deadbee"],
    }  # fmt: skip
    assert manifest["left_out"]["problems: development_split"] == 2
    assert manifest["left_out"]["problems: sealed_split"] == 1
    assert manifest["left_out"]["served traces: owner not opted in"] == 1
    assert manifest["files"]["outcomes.jsonl"]["by_failure"] == {"literal_guess": 2, "wrong_value": 2}
    assert manifest["served_keys"] == ["alice"]


def test_served_keys_need_a_redis_url(tmp_path: Path) -> None:
    folder = pools_folder(tmp_path / "pools")
    assert main(["export", "--pools", str(folder), "--out", str(tmp_path / "o"), "--served-keys", "alice"]) == 2

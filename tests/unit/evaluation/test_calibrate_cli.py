"""`calibrate` from run directories: a routing table the gateway accepts, splits kept apart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadtests.calibrate import calibrate, html_section
from services.evaluation.datasets import load_problems
from services.evaluation.records import RecordWriter, write_problems
from services.gateway.routing import load_routing_table
from tests.unit.evaluation.test_report import rec

BASE = Path("services/gateway/routing/routing.v1.json")


def fake_run(run_dir: Path, split: str, seed: int) -> None:
    """Level-1 problems are solved by one sample; harder ones only by voting over 4."""
    problems = load_problems("chain_sum", 4, split=split, seed=seed)  # type: ignore[arg-type]
    write_problems(run_dir, problems)
    with RecordWriter(run_dir) as w:
        for p in problems:
            easy = p.level == 1
            single = rec(p.id, "medium", "single", "correct" if easy else "wrong", level=p.level, tokens=100)
            single.difficulty = 0.0 if easy else 0.5
            w.write(single)
            w.write(rec(p.id, "medium", "self_consistency:n=4", "correct", level=p.level, tokens=400))


def test_calibrate_writes_a_valid_table_and_evaluates(tmp_path: Path) -> None:
    fake_run(tmp_path / "cal", "calibration", 1)
    fake_run(tmp_path / "held", "heldout", 1)
    result = calibrate(tmp_path / "cal", tmp_path / "out", base_table=BASE, heldout_run=tmp_path / "held",
                       use_embeddings=False)  # fmt: skip
    table = load_routing_table(tmp_path / "out" / "routing.json")  # the gateway's own validation
    assert table.version == 2
    assert table.routes["high"]["easy"].strategy == "single"
    assert table.routes["high"]["medium"].strategy == "self_consistency" and table.routes["high"]["medium"].n == 4
    # 1x budget: only the single sample fits, in every bin - so no probe is spent on it.
    assert list(table.routes["none"]) == ["*"] and table.routes["none"]["*"].strategy == "single"
    assert not table.needs_difficulty("none") and table.needs_difficulty("high")
    held = result["heldout"]
    best = max(held["adaptive"]["probe"], key=lambda r: r["accuracy"])
    assert best["accuracy"] == 1.0
    assert held["reference"]["name"] == "self_consistency:n=4"
    assert "Held-out" in html_section(result)
    assert json.loads((tmp_path / "out" / "difficulty_model.json").read_text())["kind"] == "ridge"


def test_calibrate_refuses_overlapping_splits(tmp_path: Path) -> None:
    fake_run(tmp_path / "cal", "calibration", 1)
    with pytest.raises(AssertionError, match="overlap"):
        calibrate(tmp_path / "cal", tmp_path / "out", base_table=BASE, heldout_run=tmp_path / "cal",
                  use_embeddings=False)  # fmt: skip

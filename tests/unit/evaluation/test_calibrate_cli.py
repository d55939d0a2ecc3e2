"""`calibrate` from run directories: a routing table the gateway accepts, splits kept apart."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import get_args

import numpy as np
import pytest

from evaluation.datasets import load_problems
from evaluation.records import RecordWriter, write_problems
from loadtests.calibrate import calibrate, html_section
from services.common.difficulty_features import FEATURE_DIM, FEATURE_SET, difficulty_features
from services.common.embedding import DIM
from services.gateway.protocol import StrategyName
from services.gateway.routing import load_routing_table
from tests.unit.evaluation.test_report import rec

BASE = Path("services/gateway/routing/routing.v1.json")


def fake_run(run_dir: Path, split: str, seed: int, program: bool = False) -> None:
    """Level-1 problems are solved by one sample; harder ones only by voting over 4 (or, with
    ``program``, by one program at 150 tokens)."""
    problems = load_problems("chain_sum", 4, split=split, seed=seed)  # type: ignore[arg-type]
    write_problems(run_dir, problems)
    with RecordWriter(run_dir) as w:
        for p in problems:
            easy = p.level == 1
            single = rec(p.id, "medium", "single", "correct" if easy else "wrong", level=p.level, tokens=100)
            single.difficulty = 0.0 if easy else 0.5
            w.write(single)
            w.write(rec(p.id, "medium", "self_consistency:n=4", "correct", level=p.level, tokens=400))
            if program:
                w.write(rec(p.id, "medium", "program_of_thought:n=1", "correct", level=p.level, tokens=150))


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
    assert table.estimator.kind == "probe" and result["estimator"] == "probe"
    assert table.provenance["data"]["problems"] == result["calibration_problems"]
    assert not (tmp_path / "out" / "difficulty_model.json").exists()  # no embedding model without embeddings


def _features(texts: Sequence[str]) -> np.ndarray:
    """The gateway's feature function over a stand-in embedding (no model in a unit test)."""
    return np.vstack([difficulty_features(np.full(DIM, 1 / DIM**0.5), t) for t in texts])


def test_calibrate_writes_the_zero_token_estimator_with_provenance(tmp_path: Path) -> None:
    fake_run(tmp_path / "cal", "calibration", 1)
    fake_run(tmp_path / "held", "heldout", 1)
    result = calibrate(tmp_path / "cal", tmp_path / "out", base_table=BASE, heldout_run=tmp_path / "held",
                       features=_features, min_task_problems=3)  # fmt: skip
    table = load_routing_table(tmp_path / "out" / "routing.json")  # the gateway's own validation
    assert table.estimator.kind == "embedding" and table.estimator.features == FEATURE_SET
    assert table.estimator.ridge is not None and len(table.estimator.ridge.weights) == FEATURE_DIM
    assert [b.max for b in table.difficulty_bins][-1] == 1.0
    assert result["task_types"] == {"arithmetic": result["calibration_problems"]}
    assert table.task_routes == {}  # arithmetic is every problem here: its routes are the defaults
    provenance = table.provenance
    assert provenance["estimator"] == "embedding" and provenance["data"]["datasets"] == {"chain_sum": 12}
    assert provenance["report"].endswith("calibration.json") and provenance["date"]
    held = result["heldout"]
    assert set(held["estimator_spearman"]) == {"probe", "embedding"}
    assert provenance["heldout_spearman"] == held["estimator_spearman"]["embedding"]
    assert held["probe_tokens_charged"] > 0
    # The embedding estimator is charged nothing: routed through single, a problem costs single's 100 tokens
    # (20 prompt + 80 generated), priced in generated-token equivalents: 80 + 0.25 * 20.
    none = next(r for r in held["adaptive"]["embedding"] if r["name"].startswith("adaptive[none"))
    assert none["tokens"] == pytest.approx(85)
    assert json.loads((tmp_path / "out" / "difficulty_model.json").read_text())["kind"] == "ridge"
    assert "embedding" in html_section(result)


@pytest.mark.skipif(
    "program_of_thought" not in get_args(StrategyName), reason="program_of_thought is not a gateway strategy yet"
)
def test_calibrated_programs_serve_wherever_they_win_the_task_type_is_no_gate(tmp_path: Path) -> None:
    fake_run(tmp_path / "cal", "calibration", 1, program=True)
    calibrate(tmp_path / "cal", tmp_path / "out", base_table=BASE, features=_features, min_task_problems=3)
    table = load_routing_table(tmp_path / "out" / "routing.json")
    # Programs win wherever they fit the budget, the default routes (every task type) included.
    strategies = {r.strategy for bins in table.routes.values() for r in bins.values()}
    assert "program_of_thought" in strategies
    assert table.route("low", None, "arithmetic").strategy == "program_of_thought"
    assert table.route("low", None, "code").strategy == "program_of_thought"
    assert table.route("none", None).strategy == "single"  # none stays one greedy sample


def test_calibrate_refuses_overlapping_splits(tmp_path: Path) -> None:
    fake_run(tmp_path / "cal", "calibration", 1)
    with pytest.raises(AssertionError, match="overlap"):
        calibrate(tmp_path / "cal", tmp_path / "out", base_table=BASE, heldout_run=tmp_path / "cal",
                  use_embeddings=False)  # fmt: skip

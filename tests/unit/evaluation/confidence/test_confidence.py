"""Confidence rows replayed from pools: the same subsets as the pricing, the signals a search
would have at its end, the split, and the report's outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluation.confidence.fit import fit
from evaluation.confidence.report import report
from evaluation.confidence.rows import as_rows, confidence_configs, replays, rows_of
from evaluation.confidence.selection import FOLDS, bucket, cross_validate, fit_model, load_split, out_of_fold
from evaluation.pools.store import ProblemPool, write_chunk
from evaluation.pricing.pricer import Config, LatencyModel, Pricer
from evaluation.problems.datasets import DEVELOPMENT_KEY
from tests.unit.evaluation.pool_fixtures import draw, pool

ARITH = pool(
    "p1",
    cot=draw("cot", ("7", True), [("7", True), ("8", False), ("7", True), ("", False)], logprobs=[-0.1] * 4),
    program=draw("program", ("7", True), [("7", True), ("9", False), ("7", True), ("9", False)]),
)
SILENT = pool(
    "p2",
    cot=draw("cot", ("5", False), [("6", True), ("5", False), ("6", True), ("4", False)], logprobs=[-0.1] * 4),
    program=draw("program", ("", False), [("", False)] * 4),
)


@pytest.mark.parametrize(
    "config",
    [
        Config("cot_greedy", "cot_greedy"),
        Config("sc@3", "sc", 3),
        Config("pot@3", "pot", 3),
        Config("pot@5", "pot", 5),
        Config("hybrid@3+cot2", "pot", 3, cot=2),
    ],
)
@pytest.mark.parametrize("problem", [ARITH, SILENT], ids=["arith", "silent"])
def test_replays_agree_with_the_pricing(problem: ProblemPool, config: Config) -> None:
    runs = replays(problem, config)
    estimate = Pricer(LatencyModel()).estimate(problem, config)
    assert estimate is not None and runs
    assert sum(r.correct for r in runs) / len(runs) == pytest.approx(estimate.accuracy)


def test_signals_of_a_program_vote_and_its_fallback() -> None:
    (whole,) = replays(ARITH, Config("pot@5", "pot", 5))
    s = whole.signals
    assert (s.config, s.vote_share, s.votes, s.distinct, s.abstained, s.programs_agree) == ("pot", 0.6, 5, 2, 0, None)
    # No program answers: the greedy chain of thought answers alone (one of six ballots, and wrong).
    (fallback,) = replays(SILENT, Config("pot@5", "pot", 5))
    assert fallback.signals.vote_share == pytest.approx(1 / 6) and fallback.signals.abstained == 5
    assert not fallback.correct


def test_the_hybrid_records_whether_programs_and_thoughts_agree() -> None:
    runs = replays(ARITH, Config("hybrid@2+cot2", "pot", 2, cot=2))
    assert {r.signals.config for r in runs} == {"hybrid"}
    agreeing = [r for r in runs if r.signals.programs_agree]
    disagreeing = [r for r in runs if r.signals.programs_agree is False]
    assert agreeing and disagreeing  # thoughts (7, 8): some pairs lead with 8, some with 7
    assert all(r.signals.votes == 4 for r in runs)


def test_each_problem_and_configuration_weighs_one() -> None:
    configs = confidence_configs([ARITH, SILENT])
    names = {c.name for c in configs}
    assert "sc@4" in names and "hybrid@3+cot2" in names and not any(n.startswith("code_pass") for n in names)
    assert not any(c.early_stop for c in configs)
    rows = rows_of([ARITH, SILENT], configs)
    totals: dict[tuple[str, str], float] = {}
    for r in rows:
        totals[(r.problem, r.config)] = totals.get((r.problem, r.config), 0.0) + r.weight
    assert all(t == pytest.approx(1.0) for t in totals.values())
    assert len(rows) < sum(len(replays(p, c)) for p in (ARITH, SILENT) for c in configs)  # identical runs merged


def many(n: int, split: str) -> list[ProblemPool]:
    pools = []
    for i in range(n):
        base = ARITH if i % 2 else SILENT
        pools.append(ProblemPool({**base.problem, "id": f"{split}-{i}"}, base.family, base.kind, split,
                                 base.task_type, base.draws))  # fmt: skip
    return pools


def test_split_is_disjoint_until_development_pools_exist(tmp_path: Path) -> None:
    write_chunk(tmp_path, "calibration", 0, {"git_describe": "x"}, many(20, "calibration"))
    split = load_split(tmp_path)
    assert split.evaluation == "disjoint split" and split.train and split.test
    assert not {p.id for p in split.train} & {p.id for p in split.test}
    assert len(split.train) + len(split.test) == 20
    write_chunk(tmp_path, DEVELOPMENT_KEY, 0, {"git_describe": "x"}, many(6, DEVELOPMENT_KEY))
    split = load_split(tmp_path)
    assert split.evaluation == "development" and len(split.train) == 20 and len(split.test) == 6


def test_fit_and_report_write_the_model_and_the_measurement(tmp_path: Path) -> None:
    write_chunk(tmp_path / "pools", "calibration", 0, {}, many(12, "calibration"))
    write_chunk(tmp_path / "pools", DEVELOPMENT_KEY, 0, {}, many(4, DEVELOPMENT_KEY))
    split = load_split(tmp_path / "pools")
    model, cv, rows = fit_model(split)
    assert set(cv) == {"shrunk", "platt", "isotonic", "logistic"}
    assert model.kind == min(cv, key=lambda k: cv[k]["log_loss"])
    assert cross_validate(rows, ["shrunk"])["shrunk"] == cv["shrunk"]
    result = report(split, model, tmp_path / "out")
    saved = json.loads((tmp_path / "out" / "report.json").read_text())
    assert saved["evaluation"] == "development" and saved["problems"] == {"fit": 12, "measured": 4}
    low, high = saved["calibrated_95"]["ece"]
    assert 0.0 <= low <= result["calibrated"]["ece"] <= high <= 1.0
    assert sum(b["weight"] for b in saved["reliability"]) == pytest.approx(
        saved["rows"]
        and 4
        * len(
            {json.loads(line)["config"] for line in (tmp_path / "out" / "predictions.jsonl").read_text().splitlines()}
        )
    )
    assert (tmp_path / "out" / "reliability.png").stat().st_size > 1000


def test_out_of_fold_predicts_each_problem_with_a_model_that_never_saw_it() -> None:
    pools = many(10, "calibration")
    rows = rows_of(pools, [Config("sc@2", "sc", 2), Config("pot@3", "pot", 3)])
    probs = out_of_fold(rows, "isotonic")
    assert all(p is not None for p in probs)
    fold_of = {r.problem: int(bucket(r.problem, "fold") * FOLDS) for r in rows}
    first = rows[0]
    unseen = fit(as_rows([r for r in rows if fold_of[r.problem] != fold_of[first.problem]]), "isotonic")
    assert probs[0] == unseen.probability(first.signals)

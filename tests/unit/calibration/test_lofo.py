"""``lofo`` end to end on hand-built pools (estimator off: no encoder): one fit per left-out
family without it, its routes priced on that family's development and calibration pools, a
family whose task type no other family supplies routed by the default routes, and the verb
registered beside the others without importing any."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from calibration.cli import VERBS, main
from calibration.lib.drawer import DrawSettings, program_version
from calibration.verbs import lofo
from evaluation.pools.store import Draw, ProblemPool, write_chunk
from tests.unit.evaluation.pool_fixtures import draw


def pool(pid: str, family: str, question: str, split: str, greedy_right: bool) -> ProblemPool:
    sampled = [("1", True), ("w", False), ("1", True), ("1", True)]
    greedy = ("1", True) if greedy_right else ("w", False)
    draws: dict[str, Draw] = {"cot": draw("cot", greedy, sampled), "program": draw("program", greedy, sampled, 5)}
    problem = {"id": pid, "dataset": family, "level": 1, "question": question, "reference": "1", "check": "math",
               "extra": {}}  # fmt: skip
    kind = "arithmetic" if family == "chain_sum" else "counting"
    return ProblemPool(problem, family, kind, split, "label", draws)


def pools(split: str) -> list[ProblemPool]:
    sums = [pool(f"{split}-s{i}", "chain_sum", f"What is {i} + 17?", split, i % 2 == 0) for i in range(3)]
    letters = [pool(f"{split}-l{i}", "letter_counting", f'How many times does the letter "r" appear in the text: '
                    f'"{"r" * (i + 1)}"?', split, i == 0) for i in range(3)]  # fmt: skip
    return sums + letters


def test_lofo_is_registered_and_imports_no_verb() -> None:
    assert lofo in VERBS and lofo.NAME == "lofo"
    tree = ast.parse(Path(lofo.__file__).read_text())
    modules = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert not any(m.startswith("calibration.verbs") for m in modules)


def test_each_family_is_fitted_without_it_and_priced_on_both_its_splits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    header = {"git_describe": "abc", "model": "m", "model_sha256": "remote:m", "program_version": program_version(),
              "settings": DrawSettings(k=4).as_dict(),
              "data": {"seed": 0, "per_family": 3, "families": ["chain_sum", "letter_counting"]}}  # fmt: skip
    pool_dir, out = tmp_path / "pools", tmp_path / "lofo"
    write_chunk(pool_dir, "calibration", 1, header, pools("calibration"))
    write_chunk(pool_dir, "heldout", 1, header, pools("heldout"))
    assert main(["lofo", "--model", "m", "--pools", str(pool_dir), "--out", str(out), "--estimator", "none",
                 "--limit", "4"]) == 0  # fmt: skip
    [written] = list(out.glob("lofo-*.json"))
    body = json.loads(written.read_text())
    folds = {f["left_out"]: f for f in body["folds"]}
    assert list(folds) == ["chain_sum", "letter_counting"]
    assert folds["chain_sum"]["fit"]["families"] == {"letter_counting": 3}  # fitted without the family
    assert folds["chain_sum"]["fit"]["own_routes"] == ["computable"] and folds["chain_sum"]["kind_elsewhere"] == []
    assert body["in_family_fit"]["families"] == {"chain_sum": 3, "letter_counting": 3}
    rows = body["rows"]["chain_sum"]
    assert [r["id"] for r in rows["development"]] == [f"heldout-s{i}" for i in range(3)]
    assert [r["id"] for r in rows["calibration"]] == [f"calibration-s{i}" for i in range(3)]
    assert {r["routes"] for r in rows["development"]} == {"default"}  # arithmetic: no other family has it
    assert all(r["efforts"]["none"]["candidates"] == 1 for r in rows["development"])
    summary = body["per_family"]["chain_sum"]["development"]
    assert summary["left_out"]["none"]["problems"] == 3 and summary["in_family"]["none"]["problems"] == 3
    assert summary["vs_in_family"]["none"]["difference"] == pytest.approx(0.0)  # greedy is greedy
    assert summary["committed"]["none"]["problems"] == 0  # no committed report of model "m"
    assert body["pooled"]["calibration"]["left_out"]["none"]["problems"] == 6
    assert body["provenance"]["in_family_report"] is None and body["provenance"]["limit"] == 4
    printed = capsys.readouterr().out
    assert "chain_sum (arithmetic, alone in its kind)" in printed and "### `high`" in printed


def test_the_newest_development_report_is_found_under_either_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def report(name: str, model: str = "m", fit: dict[str, str] | None = None) -> Path:
        path = tmp_path / name
        path.write_text(json.dumps({"provenance": {"model": model, "fit": fit or {}}}))
        return path

    monkeypatch.setattr(lofo, "DATA", tmp_path)
    report("heldout_ladder-20261206T093648Z.json")  # committed before the split was named development
    assert lofo.newest_report("m") == tmp_path / "heldout_ladder-20261206T093648Z.json"
    newest = report("development_ladder-20261208T010000Z.json")
    report("heldout_ladder_escalation-20261209T000000Z.json", fit={"escalation": "large"})
    report("development_ladder-20261209T000000Z.json", model="other")
    assert lofo.newest_report("m") == newest
    assert lofo.newest_report("absent") is None

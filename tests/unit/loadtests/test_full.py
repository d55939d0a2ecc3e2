"""``python -m loadtests full`` (what ``make loadtest`` runs): the development run of pinned
configurations beside every effort routed by the gateway's own table, then the report; no
calibration step."""

from __future__ import annotations

import json
from pathlib import Path

from loadtests.cli import main
from tests.unit.loadtests.test_cli_input import stub  # noqa: F401  (the fixture)


def test_full_runs_the_development_grid_and_writes_the_report(tmp_path: Path, stub: str) -> None:  # noqa: F811
    out = tmp_path / "full"
    code = main([
        "full", "--base-url", stub, "--model", "m", "--datasets", "chain_sum", "--levels", "1", "--problems", "2",
        "--configs", "single,self_consistency:n=2", "--efforts", "low,high", "--no-stream", "--no-traces",
        "--no-start-stack", "--out", str(out),
    ])  # fmt: skip
    assert code == 0
    records = [json.loads(line) for line in (out / "development-run" / "records.jsonl").read_text().splitlines()]
    problems = {r["problem_id"] for r in records}
    assert problems and len(records) == len(problems) * 4  # 2 pinned configurations + 2 routed efforts
    assert {r["split"] for r in records} == {"development"}
    assert {r["strategy_pinned"] for r in records} == {"single", "self_consistency:n=2", ""}
    assert not (out / "calibration").exists() and not (out / "calibration-run").exists()
    assert "development problems" in (out / "report" / "report.html").read_text()

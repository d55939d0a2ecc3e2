"""``confidence fit|report``: fit the calibrated confidence (``services/common/confidence.py``) on
candidate pools, or measure it.

``fit`` writes ``services/common/confidence.v1.json``: prompt priors fitted on every calibration
problem, and the calibrator whose kind grouped cross-validation chose, fitted on replayed rows
(:mod:`evaluation.confidence.selection`). ``report`` measures a model on the development split's pools (a
disjoint hash split of the calibration problems while none is drawn, and it says so) and writes
``docs/data/confidence/report.json``, the per-row predictions (``predictions.jsonl``), the
reliability diagram (``reliability.png``) and ``summary.md`` (:mod:`evaluation.confidence.report`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from evaluation.confidence.report import OUT, report, summary
from evaluation.confidence.selection import POOLS, fit_model, load_split
from services.common.confidence import DEFAULT_PATH, Calibrator

NAME = "confidence"
HELP = "fit the calibrated confidence on pools (fit) or measure it on development pools (report)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("command", choices=("fit", "report"))
    p.add_argument("--pools", type=Path, default=POOLS)
    p.add_argument("--model", type=Path, default=DEFAULT_PATH)
    p.add_argument("--out", type=Path, default=OUT)


def run(a: argparse.Namespace) -> int:
    split = load_split(a.pools)
    if a.command == "fit":
        model, cv, rows = fit_model(split)
        model.save(a.model)
        print(f"{a.model}: {model.kind} on {len(split.train)} problems ({len(rows)} rows); cv {json.dumps(cv)}")
        return 0
    model = Calibrator.load(a.model)
    result = report(split, model, a.out)
    cal, ci = result["calibrated"], result["calibrated_95"]
    print(summary(result))
    raw = result["raw_vote_share"]["ece"]
    print(f"{result['evaluation']}: {len(split.test)} problems; ECE {cal['ece']:.3f} {ci['ece']}, "
          f"Brier {cal['brier']:.3f} {ci['brier']}; raw vote share ECE {raw:.3f}")  # fmt: skip
    return 0

"""``served-replay``: a routed run's served confidence predicted again offline by any confidence
model (:mod:`evaluation.confidence.served_replay`): each answered request's route replayed on
its problem's development pool and scored, beside the live ECE of the model that served the run.

    python -m calibration served-replay --routed docs/data/calibration/routed/qwen2.5-coder-0.5b \\
        --model served=git:3053570:services/common/confidence.v1.json \\
        --model new=services/common/confidence.v1.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path
from typing import Any

from calibration.lib.paths import SHIPPED_POOLS
from calibration.lib.records import read_records
from evaluation.confidence.served_replay import answered, replay, score, widened
from evaluation.pools.store import read_pools
from evaluation.problems.datasets import DEVELOPMENT_KEY
from evaluation.stats.calibration_metrics import expected_calibration_error
from services.common.confidence import Calibrator

NAME = "served-replay"
HELP = "score confidence models on a routed run's answers, replayed on development pools"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--routed", type=Path, required=True, help="a routed run's folder of record chunks")
    p.add_argument("--pools", type=Path, default=SHIPPED_POOLS)
    p.add_argument("--model", action="append", required=True,
                   help="NAME=PATH (or NAME=git:REV:PATH) of a confidence model")  # fmt: skip
    p.add_argument("--out", type=Path, help="write the result as JSON here")


def read_model(path: str) -> Calibrator:
    """A confidence model from a file, or from a commit (``git:REV:PATH``: the model a past run was
    served by), widened to this code's features."""
    if path.startswith("git:"):
        text = subprocess.run(["git", "show", path.removeprefix("git:")], check=True, capture_output=True, text=True)
        return Calibrator.from_dict(widened(json.loads(text.stdout)))
    return Calibrator.from_dict(widened(json.loads(Path(path).read_text())))


def run(a: argparse.Namespace) -> int:
    answers = answered(read_records(a.routed)[0])
    pools = read_pools(a.pools, DEVELOPMENT_KEY)
    live = [(float(r["confidence"]), bool(r["correct"])) for r in answers]
    result: dict[str, Any] = {
        "routed": str(a.routed), "pools": str(a.pools), "answers": len(answers),
        "live_ece_of_the_served_model": expected_calibration_error([p for p, _ in live], [c for _, c in live]),
        "models": {},
    }  # fmt: skip
    for spec in a.model:
        name, _, path = spec.partition("=")
        model = read_model(path)
        rows, missed = replay(answers, pools, model)
        result["models"][name] = score(rows) | {"path": path, "not_replayed": missed,
                                                "provenance": dict(model.provenance) | {"chunks": None}}  # fmt: skip
        print(f"{name}: {json.dumps(result['models'][name] | {'provenance': None})}")
    if a.out is not None:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0

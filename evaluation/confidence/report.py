"""The calibrated confidence measured: ECE, Brier and log loss with 95% intervals over problems,
the reliability diagram, and the files ``docs/confidence.md`` cites.

:func:`report` scores a model on the measured split's rows (priors from the shipped ridges) and,
out of fold, on every problem drawn; it writes ``report.json``, the per-row predictions
(``predictions.jsonl``), the reliability diagram (``reliability.png``) and ``summary.md``.
Bootstrap intervals resample problems, never rows (the rows of one problem are not independent).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from evaluation.confidence.prior import features_of, predict
from evaluation.confidence.prior import out_of_fold as prior_oof
from evaluation.confidence.rows import Weighted, confidence_configs, rows_of
from evaluation.confidence.selection import DEVELOPMENT, FOLDS, Split, fold_of, out_of_fold
from evaluation.pools.provenance import git_describe
from evaluation.stats.calibration_metrics import brier, expected_calibration_error, log_loss
from services.common.confidence import Calibrator

OUT = Path("docs/data/confidence")
BOOTSTRAP = 1000


def metrics(rows: Sequence[Weighted], probs: Sequence[float]) -> dict[str, float]:
    right = [r.correct for r in rows]
    weights = [r.weight for r in rows]
    return {
        "ece": expected_calibration_error(probs, right, weights),
        "brier": brier(probs, right, weights),
        "log_loss": log_loss(probs, right, weights),
        "accuracy": sum(w for r, w in zip(right, weights, strict=True) if r) / sum(weights),
        "mean_confidence": sum(p * w for p, w in zip(probs, weights, strict=True)) / sum(weights),
    }


def bootstrap(rows: Sequence[Weighted], probs: Sequence[float], *, seed: int = 0,
              resamples: int = BOOTSTRAP) -> dict[str, tuple[float, float]]:  # fmt: skip
    """95% percentile intervals of each metric, resampling problems with replacement."""
    by_problem: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_problem.setdefault(r.problem, []).append(i)
    groups = list(by_problem.values())
    rng = np.random.default_rng(seed)
    samples: dict[str, list[float]] = {}
    for _ in range(resamples):
        picked = [i for g in rng.integers(0, len(groups), size=len(groups)) for i in groups[int(g)]]
        m = metrics([rows[i] for i in picked], [probs[i] for i in picked])
        for name, value in m.items():
            samples.setdefault(name, []).append(value)
    return {k: (float(np.percentile(v, 2.5)), float(np.percentile(v, 97.5))) for k, v in samples.items()}


def reliability(rows: Sequence[Weighted], probs: Sequence[float], bins: int = 10) -> list[dict[str, float]]:
    out = []
    for b in range(bins):
        members = [(p, r) for p, r in zip(probs, rows, strict=True) if min(bins - 1, int(p * bins)) == b]
        w = sum(r.weight for _, r in members)
        out.append({
            "low": b / bins,
            "high": (b + 1) / bins,
            "weight": w,
            "problems": len({r.problem for _, r in members}),
            "mean_confidence": sum(p * r.weight for p, r in members) / w if w else math.nan,
            "accuracy": sum(r.weight for _, r in members if r.correct) / w if w else math.nan,
        })  # fmt: skip
    return out


def plot(diagram: list[dict[str, float]], raw: list[dict[str, float]], title: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(5, 6), height_ratios=(3, 1), sharex=True)
    top.plot([0, 1], [0, 1], ls="--", c="grey", lw=1, label="perfect")
    for data, label, style in ((raw, "raw vote share", "s:"), (diagram, "calibrated", "o-")):
        xs = [d["mean_confidence"] for d in data if d["weight"] > 0]
        ys = [d["accuracy"] for d in data if d["weight"] > 0]
        top.plot(xs, ys, style, label=label)
    top.set_ylabel("accuracy")
    top.set_title(title, fontsize=9)
    top.legend(loc="upper left", fontsize=8)
    top.set_xlim(0, 1)
    top.set_ylim(0, 1)
    bottom.bar([d["low"] + 0.05 for d in diagram], [d["weight"] for d in diagram], width=0.09)
    bottom.set_xlabel("confidence")
    bottom.set_ylabel("weight")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report(split: Split, model: Calibrator, out: Path = OUT) -> dict[str, Any]:
    configs = confidence_configs(split.train + split.test)
    features = features_of(split.train + split.test)
    rows = rows_of(split.test, configs, priors=predict(model.priors, split.test, features))
    if not rows:
        raise SystemExit("no problems to report on")
    probs = [model.probability(r.signals) for r in rows]
    raw = [r.signals.vote_share for r in rows]
    per_family: dict[str, dict[str, float]] = {}
    for family in sorted({r.signals.family for r in rows}):
        idx = [i for i, r in enumerate(rows) if r.signals.family == family]
        per_family[family] = metrics([rows[i] for i in idx], [probs[i] for i in idx])
    diagram = reliability(rows, probs)
    everything = rows_of(split.train + split.test, configs,
                         priors=prior_oof(split.train + split.test, features, fold_of, FOLDS))  # fmt: skip
    oof = [(r, p) for r, p in zip(everything, out_of_fold(everything, model.kind), strict=True) if p is not None]
    oof_rows, oof_probs = [r for r, _ in oof], [p for _, p in oof]
    result: dict[str, Any] = {
        "evaluation": split.evaluation,
        "note": (
            "the development split's pools (looked at during development: not a held-out measurement)"
            if split.evaluation == DEVELOPMENT
            else "no development pools drawn yet: a disjoint split of the calibration problems drawn so far "
            "(by a hash of the id), NOT the measurement on the development split"
        ),
        "model": {"kind": model.kind, "families": list(model.families), "base_rate": model.base_rate},
        "problems": {"fit": len(split.train), "measured": len(split.test)},
        "measured_problem_ids": sorted(p.id for p in split.test),
        "families_measured": sorted({p.family for p in split.test}),
        "rows": len(rows),
        "bins": 10,
        "calibrated": metrics(rows, probs),
        "calibrated_95": bootstrap(rows, probs),
        "raw_vote_share": metrics(rows, raw),
        "raw_vote_share_95": bootstrap(rows, raw),
        "per_family": per_family,
        "out_of_fold": {
            "what": f"every problem drawn ({len(split.train) + len(split.test)}), each predicted by a "
            f"`{model.kind}` model fitted on the other {FOLDS - 1} folds (grouped by problem)",
            "problems": len({r.problem for r in oof_rows}),
            "calibrated": metrics(oof_rows, oof_probs) if oof_rows else {},
            "calibrated_95": bootstrap(oof_rows, oof_probs) if oof_rows else {},
            "reliability": reliability(oof_rows, oof_probs) if oof_rows else [],
        },
        "reliability": diagram,
        "reliability_raw": reliability(rows, raw),
        "cross_validation": dict(model.provenance.get("cross_validation", {})),
        "chunks": split.chunks,
        "git_describe": git_describe(),
        "bootstrap": {"resamples": BOOTSTRAP, "unit": "problem"},
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    with (out / "predictions.jsonl").open("w") as f:
        for r, p in zip(rows, probs, strict=True):
            f.write(json.dumps({"problem": r.problem, "config": r.config, "signals": asdict(r.signals),
                                "confidence": round(p, 6), "correct": r.correct, "weight": round(r.weight, 6)},
                               sort_keys=True) + "\n")  # fmt: skip
    cal = result["calibrated"]
    low, high = result["calibrated_95"]["ece"]
    title = (f"{model.kind}, {split.evaluation}: {len(split.test)} problems; "
             f"ECE {cal['ece']:.3f} [{low:.3f}, {high:.3f}]")  # fmt: skip
    plot(diagram, result["reliability_raw"], title, out / "reliability.png")
    (out / "summary.md").write_text(summary(result))
    return result


def summary(result: dict[str, Any]) -> str:
    """The measurement as the paragraph ``docs/confidence.md`` quotes (also ``summary.md``)."""
    cal, ci, raw = result["calibrated"], result["calibrated_95"], result["raw_vote_share"]
    rci = result["raw_vote_share_95"]
    what = "the development split" if result["evaluation"] == DEVELOPMENT else (
        "a disjoint split of the calibration problems drawn so far (not the measurement on the development split)"
    )  # fmt: skip
    lines = [
        f"On {result['problems']['measured']} problems of {what}, fitted on {result['problems']['fit']} "
        f"(model `{result['model']['kind']}`; families measured: {', '.join(result['families_measured'])}), "
        f"{result['rows']} replayed (problem, configuration, signals) rows, 10 bins, 95% bootstrap intervals "
        "over problems:",
        "",
        "| | ECE | Brier | log loss | accuracy | mean confidence |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, m, i in (("calibrated", cal, ci), ("raw vote share", raw, rci)):
        cells = [f"{m[k]:.3f} [{i[k][0]:.3f}, {i[k][1]:.3f}]" for k in ("ece", "brier", "log_loss")]
        lines.append(f"| {name} | {' | '.join(cells)} | {m['accuracy']:.3f} | {m['mean_confidence']:.3f} |")
    oof = result.get("out_of_fold", {})
    if oof.get("calibrated"):
        m, i = oof["calibrated"], oof["calibrated_95"]
        lines += ["", f"Out of fold, {oof['what']}: ECE {m['ece']:.3f} [{i['ece'][0]:.3f}, {i['ece'][1]:.3f}], "
                  f"Brier {m['brier']:.3f} [{i['brier'][0]:.3f}, {i['brier'][1]:.3f}]."]  # fmt: skip
    lines += ["", f"Chunks: {', '.join(result['chunks'])}; code {result['git_describe']}."]
    return "\n".join(lines) + "\n"

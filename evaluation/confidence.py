"""Fit and measure the calibrated confidence (``services/common/confidence.py``) on candidate pools.

Training rows come from replaying configurations on each problem's pool, as the pricing does
(:mod:`evaluation.pricing`: the same configurations, the same ``n``-subsets drawn by the same
seeded generator), but keeping what the search would know at its end: the
:class:`~services.common.confidence.ConfidenceSignals` of the answer it chose, and whether that
answer is right. Every replay of one (problem, configuration) weighs ``1 / replays``, so each
configuration counts once per problem; bootstrap intervals resample problems, never rows (the
rows of one problem are not independent). Each row also carries the prompt's prior
(:mod:`evaluation.confidence_prior`): out of fold for the rows fitted on, from the shipped
ridges for the rows measured.

Splits: the calibrator is fitted on calibration pools and measured on held-out pools. While no
held-out pool has been drawn, both commands use a disjoint split of the calibration problems by
a hash of their id instead, and every output says so (``evaluation``: ``"disjoint split"``):
that is not the issue's held-out measurement.

``python -m evaluation.confidence fit`` writes ``services/common/confidence.v1.json``;
``... report`` writes ``docs/data/confidence/report.json``, the per-row predictions
(``predictions.jsonl``) and the reliability diagram (``reliability.png``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from evaluation.calibration_metrics import brier, expected_calibration_error, log_loss
from evaluation.confidence_fit import Row, fit
from evaluation.confidence_prior import ALPHA as PRIOR_ALPHA
from evaluation.confidence_prior import Priors, features_of, fit_priors, predict
from evaluation.confidence_prior import out_of_fold as prior_oof
from evaluation.pools import ProblemPool, iter_chunks, latest_pools, task_type_of
from evaluation.pricing import DEFAULT_LIMIT, Config, LatencyModel, Pricer, confidence_family
from evaluation.pricing_table import default_configs, judges_in
from services.common.confidence import (
    DEFAULT_PATH,
    Calibrator,
    ConfidenceSignals,
    ModelKind,
    prior_kind,
)
from services.common.difficulty_features import FEATURE_SET

POOLS = Path("docs/data/calibration/pools/qwen2.5-coder-0.5b")
OUT = Path("docs/data/confidence")
KINDS: tuple[ModelKind, ...] = ("shrunk", "platt", "isotonic", "logistic")
REPLAYED = ("cot_greedy", "code_greedy", "sc", "code_vote", "pot", "bon", "wvote")
FOLDS = 5
BOOTSTRAP = 1000
TEST_SHARE = 0.4  # of calibration problems, for the disjoint split while no held-out pool exists


@dataclass(frozen=True)
class Replay:
    """One replayed run of a configuration on a problem: its signals, whether it was right."""

    problem: str
    config: str
    signals: ConfidenceSignals
    correct: bool


def confidence_configs(pools: Sequence[ProblemPool]) -> list[Config]:
    """The pricing's configurations that end in one answer with a vote to read (no oracle
    ``code_pass``; no early stopping yet: that needs the stopping rule's replay)."""
    k = max((len(d.sampled) for p in pools for d in p.draws.values()), default=0)
    return [c for c in default_configs(k, judges_in(pools)) if c.family in REPLAYED and not c.early_stop]


def replays(pool: ProblemPool, config: Config, *, seed: int = 0, limit: int = DEFAULT_LIMIT,
            prior: Mapping[str, float] | None = None) -> list[Replay]:  # fmt: skip
    """Every replay of ``config`` on ``pool`` (none when it does not apply): the pricing's own
    runs (:meth:`evaluation.pricing.Pricer.outcomes`, same subsets, same seeded order), so the
    signals fitted on are the ones the priced cascade escalates on and the mean of ``correct`` is
    the pricing's accuracy estimate. The signals carry the prompt's task type and, from
    ``prior`` (kind -> value: :mod:`evaluation.confidence_prior`), its prior, as a served
    answer's do (``services/search/strategies/signals.py:answer_confidence``)."""
    if not config.applies(pool) or config.early_stop:
        return []
    rng = random.Random(f"{seed}:{pool.id}:{config.name}")
    runs = Pricer(LatencyModel(), limit=limit, seed=seed).outcomes(pool, config, rng)
    task = task_type_of(pool)
    kind_prior = (prior or {}).get(prior_kind(confidence_family(config)))
    return [
        Replay(pool.id, config.name, replace(o.signals, task_type=task, prior=kind_prior), o.correct)
        for o in runs
        if o.signals is not None
    ]


# ------------------------------------------------------------------------------------ rows
@dataclass(frozen=True)
class Weighted:
    """Replays of one (problem, configuration) with identical signals and verdict, merged."""

    problem: str
    config: str
    signals: ConfidenceSignals
    correct: bool
    weight: float


def rows_of(pools: Sequence[ProblemPool], configs: Sequence[Config], *, seed: int = 0,
            priors: Priors | None = None) -> list[Weighted]:  # fmt: skip
    """Every configuration's replays on every pool, each (problem, configuration) weighing 1;
    with ``priors``, each problem's prompt priors in the signals."""
    out: list[Weighted] = []
    for pool in pools:
        for config in configs:
            runs = replays(pool, config, seed=seed, prior=(priors or {}).get(pool.id))
            merged: dict[tuple[ConfidenceSignals, bool], float] = {}
            for r in runs:
                merged[(r.signals, r.correct)] = merged.get((r.signals, r.correct), 0.0) + 1.0 / len(runs)
            out += [Weighted(pool.id, config.name, s, c, w) for (s, c), w in merged.items()]
    return out


def as_rows(rows: Sequence[Weighted]) -> list[Row]:
    """Rows for :func:`services.common.confidence.fit`, identical ones merged (a fit over a few
    thousand rows instead of tens of thousands: the pure-Python Newton steps stay fast)."""
    merged: dict[tuple[ConfidenceSignals, bool], float] = {}
    for r in rows:
        merged[(r.signals, r.correct)] = merged.get((r.signals, r.correct), 0.0) + r.weight
    return [(s, c, w) for (s, c), w in merged.items()]


def bucket(problem: str, salt: str = "confidence") -> float:
    digest = hashlib.sha256(f"{salt}:{problem}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


# ------------------------------------------------------------------------------------ splits
@dataclass(frozen=True)
class Split:
    train: list[ProblemPool]
    test: list[ProblemPool]
    evaluation: str  # "held-out" or "disjoint split"
    chunks: list[str]


def load_split(directory: Path = POOLS) -> Split:
    """Calibration pools to fit, held-out pools to measure; while there are no held-out pools,
    a disjoint hash split of the calibration problems (``TEST_SHARE`` of them measured)."""
    chunks = list(iter_chunks(directory))
    latest = latest_pools(chunks)
    pools = [p for p, _ in latest.values()]
    names = sorted({c.path.name for _, c in latest.values()})
    calibration = [p for p in pools if p.split == "calibration"]
    heldout = [p for p in pools if p.split == "heldout"]
    if heldout:
        return Split(calibration, heldout, "held-out", names)
    train = [p for p in calibration if bucket(p.id) >= TEST_SHARE]
    test = [p for p in calibration if bucket(p.id) < TEST_SHARE]
    return Split(train, test, "disjoint split", names)


def fold_of(problem: str, folds: int = FOLDS) -> int:
    """A problem's cross-validation fold (by a hash of its id: never split, stable across runs)."""
    return int(bucket(problem, "fold") * folds)


# ------------------------------------------------------------------------------------ selection
def out_of_fold(rows: Sequence[Weighted], kind: ModelKind, folds: int = FOLDS) -> list[float | None]:
    """Each row's probability from a model of ``kind`` fitted on the other folds (folds by a hash
    of the problem id, so no problem is ever predicted by a model that saw it); ``None`` for rows
    whose fold had nothing else to fit on."""
    fold = {r.problem: fold_of(r.problem, folds) for r in rows}
    probs: list[float | None] = [None] * len(rows)
    for k in range(folds):
        train = [r for r in rows if fold[r.problem] != k]
        test = [i for i, r in enumerate(rows) if fold[r.problem] == k]
        if not train or not test:
            continue
        model = fit(as_rows(train), kind)
        for i in test:
            probs[i] = model.probability(rows[i].signals)
    return probs


def cross_validate(rows: Sequence[Weighted], kinds: Sequence[ModelKind] = KINDS,
                   folds: int = FOLDS) -> dict[str, dict[str, float]]:  # fmt: skip
    """Grouped (by problem) k-fold log loss, Brier and ECE of each model kind on ``rows``."""
    result: dict[str, dict[str, float]] = {}
    for kind in kinds:
        scored = [(r, p) for r, p in zip(rows, out_of_fold(rows, kind, folds), strict=True) if p is not None]
        probs = [p for _, p in scored]
        right = [r.correct for r, _ in scored]
        weights = [r.weight for r, _ in scored]
        result[kind] = {
            "log_loss": log_loss(probs, right, weights),
            "brier": brier(probs, right, weights),
            "ece": expected_calibration_error(probs, right, weights),
        }
    return result


def choose(cv: dict[str, dict[str, float]]) -> ModelKind:
    """The kind of lowest cross-validated log loss (ties: the simpler kind, earlier in ``KINDS``)."""
    return min((k for k in KINDS if k in cv), key=lambda k: (round(cv[k]["log_loss"], 9), KINDS.index(k)))


def git_describe() -> str:
    try:
        return subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True,
                              check=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def fit_model(split: Split) -> tuple[Calibrator, dict[str, dict[str, float]], list[Weighted]]:
    """The shipped model: prompt priors fitted on every calibration problem, and the calibrator
    chosen by grouped cross-validation and fitted on rows whose priors are out of fold."""
    configs = confidence_configs(split.train + split.test)
    features = features_of(split.train)
    priors = fit_priors(split.train, features)
    rows = rows_of(split.train, configs, priors=prior_oof(split.train, features, fold_of, FOLDS))
    if not rows:
        raise SystemExit("no calibration pools to fit on")
    cv = cross_validate(rows)
    kind = choose(cv)
    provenance = {
        "fitted_on": "calibration problems"
        + (" (train part of a disjoint split)" if split.evaluation != "held-out" else ""),
        "problems": len(split.train),
        "problem_ids_sha256": hashlib.sha256("\n".join(sorted(p.id for p in split.train)).encode()).hexdigest(),
        "chunks": split.chunks,
        "configs": [c.name for c in configs],
        "selection": "grouped 5-fold log loss",
        "priors": {
            "kinds": sorted(priors),
            "alpha": PRIOR_ALPHA,
            "features": FEATURE_SET,
            "rows": "out-of-fold priors (ridges fitted on the other folds)",
        },
        "cross_validation": cv,
        "git_describe": git_describe(),
        "pools": str(POOLS),
    }
    model = fit(as_rows(rows), kind, provenance=provenance, priors=priors, prior_features=FEATURE_SET)
    return model, cv, rows


# ------------------------------------------------------------------------------------ report
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
            "held-out pools"
            if split.evaluation == "held-out"
            else "no held-out pools drawn yet: a disjoint split of the calibration problems drawn so far "
            "(by a hash of the id), NOT the issue's held-out measurement"
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
    what = "held-out problems" if result["evaluation"] == "held-out" else (
        "a disjoint split of the calibration problems drawn so far (not the issue's held-out measurement)"
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.confidence", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=("fit", "report"))
    parser.add_argument("--pools", type=Path, default=POOLS)
    parser.add_argument("--model", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    split = load_split(args.pools)
    if args.command == "fit":
        model, cv, rows = fit_model(split)
        model.save(args.model)
        print(f"{args.model}: {model.kind} on {len(split.train)} problems ({len(rows)} rows); cv {json.dumps(cv)}")
        return 0
    model = Calibrator.load(args.model)
    result = report(split, model, args.out)
    cal, ci = result["calibrated"], result["calibrated_95"]
    print(summary(result))
    raw = result["raw_vote_share"]["ece"]
    print(f"{result['evaluation']}: {len(split.test)} problems; ECE {cal['ece']:.3f} {ci['ece']}, "
          f"Brier {cal['brier']:.3f} {ci['brier']}; raw vote share ECE {raw:.3f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The figures of a sealed-split run, from its records alone (pure; rendered by :mod:`~.sealed_markdown`).

Every (problem, effort) pair's newest record stands. A record is answered (graded by
reasoning-gym's checker, right only at a grade of 1.0), an infrastructure error (excluded from
every denominator and counted apart, never wrong) or absent (not sent yet: a partial run reports
what it has and how much is missing). Figures:

- per effort, per task kind (the kind the gateway chose, ``ttc.task_type``) and per family:
  accuracy with its 95% Wilson interval (:mod:`evaluation.stats.intervals`) over the answered
  problems, coverage (answered of the group's problems), errors, missing, and the mean, sd and
  p90 of candidates drawn (``ttc.candidates_generated``) and generated tokens;
- ``high`` - ``low`` on the problems both answered, with its paired bootstrap interval;
- the Must-show checks: ``high`` at least 10 points above ``low`` with the paired interval above
  0; no effort more than 2 points below the effort under it in any task kind with 20 problems
  or more (on the problems both answered); on the problems where ``high``'s first wave agreed,
  ``high``'s mean candidates at most the first wave's size;
- the served confidence per strategy: ECE with a bootstrap interval over problems and its
  reliability table.

The first wave is read from the reply's ``ttc`` object, which every record keeps whole:
``ttc.first_wave = {"size": int, "agreed": bool}`` (:data:`FIRST_WAVE`). A gateway whose replies
do not carry it leaves that check unmeasured, and the report says so; the records can be read
again once it does.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from evaluation.heldout.checks import Check
from evaluation.heldout.escalation import paired_difference
from evaluation.heldout.sealed_plan import Pair, answered, newest
from evaluation.problems.sealed import SealedProblem
from evaluation.stats.calibration_metrics import bootstrap_ece, expected_calibration_error
from evaluation.stats.intervals import wilson
from evaluation.stats.ledger import ProblemLedger, Sample, summarize

HIGH_OVER_LOW = 0.10  # high at least this far above low
STEP_TOLERANCE = 0.02  # no effort more than this below the effort under it ...
STEP_MIN_PROBLEMS = 20  # ... in a task kind with at least this many problems answered at both
FIRST_WAVE = "first_wave"  # the ``ttc`` field: {"size": int, "agreed": bool}
UNKNOWN_KIND = "unknown"  # a problem no reply was answered for: the gateway's kind is not known
BINS = 10
ECE_RESAMPLES = 1000


def spread(values: Sequence[float]) -> dict[str, float | None]:
    """Mean, sample sd and p90 of ``values`` (``None`` when there are none)."""
    if not values:
        return {"mean": None, "sd": None, "p90": None}
    data = np.asarray(values, dtype=float)
    sd = float(data.std(ddof=1)) if len(data) > 1 else 0.0
    return {"mean": float(data.mean()), "sd": sd, "p90": float(np.percentile(data, 90))}


def row(problem_ids: Sequence[str], effort: str, found: Mapping[Pair, Mapping[str, Any]]) -> dict[str, Any]:
    """One effort over a group of problems: the ledger's accuracy and failures, the interval,
    coverage, and the spread of what was spent on the answered ones."""
    ledgers = []
    for pid in problem_ids:
        r = found.get((pid, effort))
        sample = None if r is None else Sample(r.get("answer"), bool(r.get("correct")), failed=not answered(r))
        ledgers.append(ProblemLedger(() if sample is None else (sample,), None if sample is None else sample.correct))
    summary = summarize(ledgers, k=1)
    done = [found[(pid, effort)] for pid in problem_ids if (pid, effort) in found]
    ok = [r for r in done if answered(r)]
    right = sum(1 for r in ok if r.get("correct"))
    strategies: dict[str, int] = {}
    for r in ok:
        strategies[str(r.get("strategy") or "")] = strategies.get(str(r.get("strategy") or ""), 0) + 1
    return {
        "effort": effort,
        "problems": len(problem_ids),
        "answered": summary.scored_problems,
        "right": right,
        "accuracy": summary.selected if ok else None,
        "interval": wilson(right, len(ok)) if ok else None,
        "coverage": len(ok) / len(problem_ids) if problem_ids else 0.0,
        "errors": summary.failures,
        "missing": len(problem_ids) - len(done),
        "candidates": spread([float(r.get("candidates") or 0) for r in ok]),
        "generated_tokens": spread([float(r.get("completion_tokens") or 0) for r in ok]),
        "prompt_tokens": spread([float(r.get("prompt_tokens") or 0) for r in ok])["mean"],
        "p50_latency_s": float(np.median([float(r.get("latency_s") or 0.0) for r in ok])) if ok else None,
        "strategies": dict(sorted(strategies.items(), key=lambda kv: -kv[1])),
    }


def kinds_of(problems: Sequence[SealedProblem], efforts: Sequence[str],
             found: Mapping[Pair, Mapping[str, Any]]) -> tuple[dict[str, str], int]:  # fmt: skip
    """Each problem's task kind as the gateway chose it (its first answered record's, efforts
    lowest first), and how many problems the gateway gave different kinds at different efforts."""
    kinds: dict[str, str] = {}
    split = 0
    for p in problems:
        seen = [str(r.get("task_kind")) for e in efforts if (r := found.get((p.id, e))) and r.get("task_kind")]
        kinds[p.id] = seen[0] if seen else UNKNOWN_KIND
        split += len(set(seen)) > 1
    return kinds, split


def paired(found: Mapping[Pair, Mapping[str, Any]], ids: Sequence[str], upper: str, lower: str,
           seed: int = 0) -> dict[str, Any]:  # fmt: skip
    """``upper`` - ``lower`` accuracy on the problems of ``ids`` both answered, with its 95%
    paired bootstrap interval (problems resampled)."""
    both = [pid for pid in ids if all((r := found.get((pid, e))) and answered(r) for e in (upper, lower))]
    hi = [float(bool(found[(pid, upper)].get("correct"))) for pid in both]
    lo = [float(bool(found[(pid, lower)].get("correct"))) for pid in both]
    mean, low, high = paired_difference(hi, lo, seed=seed)
    return {"upper": upper, "lower": lower, "problems": len(both), "difference": mean, "interval": (low, high)}


def _pts(x: float) -> str:
    return f"{100 * x:+.1f}"


def high_over_low(diff: Mapping[str, Any] | None) -> Check:
    name = f"high >= low + {100 * HIGH_OVER_LOW:.0f} points, paired 95% interval above 0"
    if diff is None or not diff["problems"]:
        return Check(name, False, "no problem answered at both high and low")
    low, high = diff["interval"]
    ok = diff["difference"] >= HIGH_OVER_LOW - 1e-9 and low > 0
    detail = f"{_pts(diff['difference'])} points [{_pts(low)}, {_pts(high)}] on {diff['problems']} problems"
    return Check(name, ok, detail)


def no_step_down(found: Mapping[Pair, Mapping[str, Any]], kinds: Mapping[str, str], efforts: Sequence[str],
                 seed: int = 0) -> tuple[Check, list[dict[str, Any]]]:  # fmt: skip
    """Each effort against the one under it, per task kind, on the problems both answered;
    judged where a kind has :data:`STEP_MIN_PROBLEMS` such problems."""
    steps = []
    for kind in sorted(set(kinds.values()) - {UNKNOWN_KIND}):
        ids = [pid for pid, k in kinds.items() if k == kind]
        for lower, upper in itertools.pairwise(efforts):
            step = paired(found, ids, upper, lower, seed)
            steps.append({"kind": kind, **step, "judged": step["problems"] >= STEP_MIN_PROBLEMS})
    judged = [s for s in steps if s["judged"]]
    bad = [s for s in judged if s["difference"] < -STEP_TOLERANCE - 1e-9]
    name = (f"no effort more than {100 * STEP_TOLERANCE:.0f} points below the effort under it, in any task kind "
            f"with >= {STEP_MIN_PROBLEMS} problems answered at both")  # fmt: skip
    if not judged:
        return Check(name, False, "no task kind has enough problems answered at two efforts"), steps
    worst = min(judged, key=lambda s: s["difference"])
    detail = "; ".join(f"{s['kind']} {s['lower']}->{s['upper']} {_pts(s['difference'])}" for s in bad) or (
        f"worst step {worst['kind']} {worst['lower']}->{worst['upper']} {_pts(worst['difference'])} points"
    )
    unjudged = sorted({s["kind"] for s in steps} - {s["kind"] for s in judged})
    detail += f"; not judged (fewer problems): {', '.join(unjudged)}" if unjudged else ""
    return Check(name, not bad, detail), steps


def first_wave(records: Sequence[Mapping[str, Any]], effort: str = "high") -> tuple[Check, dict[str, Any]]:
    """On ``effort``'s answered records whose first wave agreed (``ttc.first_wave``), mean
    candidates at most the first wave's mean size."""
    mine = [r for r in records if r["effort"] == effort and answered(r)]
    waves = [(r, w) for r in mine if isinstance(w := (r.get("ttc") or {}).get(FIRST_WAVE), dict) and "agreed" in w]
    agreed = [(r, w) for r, w in waves if w.get("agreed")]
    figures: dict[str, Any] = {"answered": len(mine), "reporting_first_wave": len(waves), "agreed": len(agreed)}
    name = f"{effort} stops at the first wave where it agreed (mean candidates <= the first wave's size)"
    if not waves:
        why = (f"not measurable: none of {len(mine)} answered {effort} replies carries ttc.{FIRST_WAVE}; the records "
               "keep each reply's ttc object whole, so the report reads it once the gateway reports it")  # fmt: skip
        return Check(name, False, why), figures
    if not agreed:
        return Check(name, False, f"no {effort} reply's first wave agreed ({len(waves)} report one)"), figures
    candidates = float(np.mean([float(r.get("candidates") or 0) for r, _ in agreed]))
    size = float(np.mean([float(w.get("size") or 0) for _, w in agreed]))
    figures |= {"mean_candidates": candidates, "mean_first_wave": size}
    detail = f"{candidates:.2f} candidates against a first wave of {size:.2f} on {len(agreed)} problems"
    return Check(name, candidates <= size + 1e-9, detail), figures


def reliability(probs: Sequence[float], right: Sequence[bool], bins: int = BINS) -> list[dict[str, Any]]:
    """Equal-width bins over [0, 1] (the last includes 1.0): answers, mean confidence, accuracy."""
    out = []
    for b in range(bins):
        members = [(p, r) for p, r in zip(probs, right, strict=True) if min(bins - 1, int(p * bins)) == b]
        out.append({"low": b / bins, "high": (b + 1) / bins, "answers": len(members),
                    "mean_confidence": float(np.mean([p for p, _ in members])) if members else None,
                    "accuracy": float(np.mean([r for _, r in members])) if members else None})  # fmt: skip
    return out


def calibration(records: Sequence[Mapping[str, Any]], seed: int = 0, resamples: int = ECE_RESAMPLES) -> dict[str, Any]:
    """The served confidence on answered records: ECE, its bootstrap interval over problems (a
    problem's answers at several efforts are resampled together) and the reliability table; an
    answer served without a confidence is counted apart."""
    ok = [r for r in records if answered(r)]
    scored = [r for r in ok if r.get("confidence") is not None]
    out: dict[str, Any] = {"answers": len(ok), "without_confidence": len(ok) - len(scored)}
    if not scored:
        return out | {"ece": None, "interval": None, "mean_confidence": None, "accuracy": None, "reliability": []}
    probs = [float(r["confidence"]) for r in scored]
    right = [bool(r.get("correct")) for r in scored]
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(scored):
        groups.setdefault(str(r["problem_id"]), []).append(i)
    interval = bootstrap_ece(probs, right, None, list(groups.values()), seed=seed, resamples=resamples, bins=BINS)
    return out | {"ece": expected_calibration_error(probs, right, bins=BINS), "interval": interval,
                  "mean_confidence": float(np.mean(probs)), "accuracy": float(np.mean(right)),
                  "problems": len(groups), "reliability": reliability(probs, right)}  # fmt: skip


def report(run_id: str, problems: Sequence[SealedProblem], efforts: Sequence[str],
           records: Sequence[Mapping[str, Any]], headers: Sequence[Mapping[str, Any]],
           seed: int = 0) -> dict[str, Any]:  # fmt: skip
    """The run's figures (module docstring) as a plain dict; ``efforts`` lowest first."""
    found = newest(records)
    stand = list(found.values())
    ids = [p.id for p in problems]
    kinds, kinds_split = kinds_of(problems, efforts, found)
    families = list(dict.fromkeys(p.family for p in problems))
    by_kind = {k: [pid for pid in ids if kinds[pid] == k] for k in dict.fromkeys(kinds[pid] for pid in ids)}
    by_family = {f: [p.id for p in problems if p.family == f] for f in families}
    diff = paired(found, ids, "high", "low", seed) if {"high", "low"} <= set(efforts) else None
    steps_check, steps = no_step_down(found, kinds, efforts, seed)
    wave_check, wave = first_wave(stand)
    errors: dict[str, int] = {}
    for r in stand:
        if not answered(r):
            errors[str(r.get("error_kind") or "unknown")] = errors.get(str(r.get("error_kind") or "unknown"), 0) + 1
    strategies = sorted({str(r.get("strategy") or "") for r in stand if answered(r)})
    loads = [h[k][0] for h in headers for k in ("load_average_start", "load_average_end") if h.get(k)]
    return {
        "run_id": run_id,
        "split": {"problems": len(problems), "families": families},
        "efforts": list(efforts),
        "chunks": len(headers),
        "code_revisions": list(dict.fromkeys(str(h.get("git_describe")) for h in headers)),
        # the revision each chunk's stack was started from (older chunks did not record it)
        "served_revisions": list(dict.fromkeys(str(h.get("served_revision") or "not recorded") for h in headers)),
        "model_sha256": sorted({str(h.get("model_sha256")) for h in headers}),
        "table_sha256": sorted({str(h.get("table_sha256")) for h in headers}),
        "started_at": min((str(h["started_at"]) for h in headers if h.get("started_at")), default=None),
        "ended_at": max((str(h["ended_at"]) for h in headers if h.get("ended_at")), default=None),
        "load_average_1min": {"max": max(loads), "mean": float(np.mean(loads))} if loads else None,
        "pairs": len(ids) * len(efforts),
        "missing": {e: sum(1 for pid in ids if (pid, e) not in found) for e in efforts},
        "errors": dict(sorted(errors.items())),
        "kinds_differing_by_effort": kinds_split,
        "per_effort": {e: row(ids, e, found) for e in efforts},
        "per_kind": {k: {e: row(members, e, found) for e in efforts} for k, members in by_kind.items()},
        "per_family": {f: {e: row(members, e, found) for e in efforts} for f, members in by_family.items()},
        "high_minus_low": diff,
        "steps": steps,
        "first_wave": wave,
        "checks": [c.as_dict() for c in (high_over_low(diff), steps_check, wave_check)],
        "confidence": {
            "all": calibration(stand, seed),
            "per_strategy": {
                s: calibration([r for r in stand if str(r.get("strategy") or "") == s], seed) for s in strategies
            },
        },
    }

"""The development ladder measured through the gateway, routed by effort: plan, check and report (pure).

The ladder is measured live at every effort, but efforts that route to the same configuration
would send the same request again. So per problem the efforts are grouped by the
route the gateway will choose (:func:`group_efforts`, the same route key the offline ladder
labels routes by), and ONE unpinned request per group is sent with the group's lowest effort; its
record says which efforts it stands for. The reply's ``ttc`` report must show the predicted
route (:func:`route_mismatch`): a mismatch is a routing error, excluded and reported, never a
wrong answer, as an infrastructure error is. :func:`adoptable` lets a run stand on another
run's records where the two tables route a (problem, effort) to the same configuration (a table
fitted with escalation differs from the small model's in a few bins). :func:`outcomes` turns
records into one outcome per (problem, effort); :func:`pending` says which pairs still need a
request; :func:`summaries` builds the rows :mod:`evaluation.heldout.checks` decides on (the offline
ladder's :class:`Summary`); :func:`served_calibration` measures the served ``ttc.confidence`` on
the same answers.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evaluation.heldout.ladder import ALL, Summary, route_key
from evaluation.routing.types import PREFILL_WEIGHT
from evaluation.stats.calibration_metrics import bootstrap_ece, expected_calibration_error
from evaluation.stats.intervals import BOOTSTRAP, wilson


@dataclass(frozen=True)
class PlannedRequest:
    """One request: sent with ``effort`` (the lowest of ``efforts``), standing for all of them."""

    problem_id: str
    effort: str
    efforts: tuple[str, ...]
    route: dict[str, Any]  # the predicted route (``Route.model_dump()``)


def provenance_hash(provenance: Mapping[str, Any]) -> str:
    """What identifies a table's provenance: the sha256 of its canonical JSON."""
    return hashlib.sha256(json.dumps(provenance, sort_keys=True, default=str).encode()).hexdigest()


def group_efforts(
    problem_id: str, routes: Mapping[str, Mapping[str, Any]], efforts: Sequence[str]
) -> list[PlannedRequest]:
    """The efforts of one problem grouped by identical predicted routes, in ``efforts`` order
    (lowest first), each group one request at its lowest effort."""
    groups: dict[str, list[str]] = {}
    for effort in efforts:
        groups.setdefault(route_key(routes[effort]), []).append(effort)
    return [
        PlannedRequest(problem_id, members[0], tuple(members), dict(routes[members[0]])) for members in groups.values()
    ]


def route_mismatch(route: Mapping[str, Any], effort: str, ext: Mapping[str, Any]) -> str:
    """Why the reply's ``ttc`` report is not the predicted route ('' when it is): the strategy
    and ``n`` it ran, the effort it applied (admission may lower it), and no strategy fallback.
    (The report carries no parameters, so those are taken on trust from the strategy.)"""
    problems = []
    if str(ext.get("strategy") or "") != route["strategy"]:
        problems.append(f"strategy {ext.get('strategy')!r}, predicted {route['strategy']!r}")
    if int(ext.get("n") or 1) != int(route.get("n") or 1):
        problems.append(f"n={ext.get('n')}, predicted {route.get('n')}")
    applied = ext.get("effort_applied")
    if applied is not None and applied != effort:
        problems.append(f"effort applied {applied!r}, requested {effort!r} (degraded by {ext.get('degraded_by')})")
    if ext.get("strategy_fallback"):
        problems.append(f"strategy fallback {ext.get('strategy_fallback')}")
    return "; ".join(problems)


@dataclass(frozen=True)
class Outcome:
    """One (problem, effort): its request's verdict, or why it has none."""

    problem_id: str
    effort: str
    kind: str
    correct: bool | None  # None: an infrastructure or routing error
    generated_tokens: int = 0
    prompt_tokens: int = 0
    latency_s: float = 0.0
    error_kind: str = ""  # "" | "route" | an infrastructure kind
    config: str = ""


def outcomes(records: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], Outcome]:
    """(problem, effort) -> the outcome of the newest record standing for it (records oldest first)."""
    out: dict[tuple[str, str], Outcome] = {}
    for r in records:
        route = r.get("route") or {}
        config = f"{route.get('strategy')}@{route.get('n', 1)}" if route else ""
        for effort in r["efforts"]:
            out[(r["problem_id"], effort)] = Outcome(
                problem_id=r["problem_id"],
                effort=effort,
                kind=r["kind"],
                correct=None if r.get("error") or r.get("correct") is None else bool(r["correct"]),
                generated_tokens=int(r.get("completion_tokens") or 0),
                prompt_tokens=int(r.get("prompt_tokens") or 0),
                latency_s=float(r.get("latency_s") or 0.0),
                error_kind=str(r.get("error_kind") or ""),
                config=config,
            )
    return out


def pending(
    plan: Sequence[PlannedRequest], records: Sequence[Mapping[str, Any]], retry_errors: bool = False
) -> list[PlannedRequest]:
    """The planned requests still to send: per group, the efforts no record stands for (or whose
    record is an error, when ``retry_errors``; a routing error is a result, never retried), sent
    at the lowest of them. A record for the same problem and effort stands, whatever group sent it."""
    done = outcomes(records)

    def missing(pid: str, effort: str) -> bool:
        o = done.get((pid, effort))
        return o is None or (retry_errors and o.correct is None and o.error_kind != "route")

    out = []
    for req in plan:
        todo = tuple(e for e in req.efforts if missing(req.problem_id, e))
        if todo:
            out.append(PlannedRequest(req.problem_id, todo[0], todo, req.route))
    return out


def newest_records(records: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], Mapping[str, Any]]:
    """(problem, effort) -> the newest record standing for it (records oldest first)."""
    newest: dict[tuple[str, str], Mapping[str, Any]] = {}
    for r in records:
        for effort in r["efforts"]:
            newest[(r["problem_id"], effort)] = r
    return newest


def adoptable(
    plan: Sequence[PlannedRequest], records: Sequence[Mapping[str, Any]], source: str
) -> list[dict[str, Any]]:
    """Another run's records that stand for this plan's (problem, effort) pairs: the newest
    record per pair (as :func:`outcomes` reads them), kept where it has a verdict (an error or a
    routing mismatch is sent again) and its route runs the configuration this plan predicts for
    that effort (:func:`evaluation.heldout.ladder.route_key`: same strategy, ``n``, verifier and params,
    and the requests are the same: seed per problem, temperature, token cap). Each copy names
    only the efforts it stands for here and ``adopted_from`` (``source``); copies of one record
    for one group are one copy."""
    newest = newest_records(records)
    out: list[dict[str, Any]] = []
    for req in plan:
        wanted = route_key(req.route)
        stands: dict[int, tuple[Mapping[str, Any], list[str]]] = {}
        for effort in req.efforts:
            found = newest.get((req.problem_id, effort))
            if found is None or found.get("error") or found.get("correct") is None:
                continue
            if route_key(found.get("route") or {}) == wanted:
                stands.setdefault(id(found), (found, []))[1].append(effort)
        out += [dict(r) | {"efforts": efforts, "adopted_from": source} for r, efforts in stands.values()]
    return out


def summarize_live(name: str, members: Sequence[Outcome]) -> Summary:
    """An effort's row over a group's outcomes: accuracy with its 95% Wilson interval, mean
    generated and prompt tokens, cost priced as the offline rows price it (generated +
    ``PREFILL_WEIGHT`` x prompt) and p50 latency over the answered ones; errors counted in
    ``unpriced`` (routing errors too), never wrong."""
    ok = [o for o in members if o.correct is not None]
    right = sum(1 for o in ok if o.correct)
    counts: dict[str, int] = {}
    for o in ok:
        counts[o.config] = counts.get(o.config, 0) + 1

    def mean(values: Sequence[float]) -> float:
        return float(np.mean(values)) if values else 0.0

    return Summary(
        name=name,
        problems=len(ok),
        accuracy=right / len(ok) if ok else 0.0,
        interval=wilson(right, len(ok)),
        generated_tokens=mean([o.generated_tokens for o in ok]),
        prompt_tokens=mean([o.prompt_tokens for o in ok]),
        cost=mean([o.generated_tokens + PREFILL_WEIGHT * o.prompt_tokens for o in ok]),  # the offline rows' cost
        p50_latency_s=float(np.median([o.latency_s for o in ok])) if ok else None,
        configs=dict(sorted(counts.items(), key=lambda kv: -kv[1])),
        unpriced=len(members) - len(ok),
    )


def summaries(found: Mapping[tuple[str, str], Outcome], efforts: Sequence[str]) -> dict[str, dict[str, Summary]]:
    """Group (task kind, in order of first appearance, then ``all``) -> effort -> its live row."""
    kinds = list(dict.fromkeys(o.kind for o in found.values()))
    out: dict[str, dict[str, Summary]] = {}
    for group in [*kinds, ALL]:
        out[group] = {
            e: summarize_live(e, [o for (_, eff), o in found.items() if eff == e and group in (ALL, o.kind)])
            for e in efforts
        }
    return out


def error_counts(found: Mapping[tuple[str, str], Outcome]) -> dict[str, int]:
    """How many (problem, effort) pairs each error kind left without a verdict."""
    counts: dict[str, int] = {}
    for o in found.values():
        if o.correct is None:
            counts[o.error_kind or "unknown"] = counts.get(o.error_kind or "unknown", 0) + 1
    return dict(sorted(counts.items()))


def answers(records: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The answers of a routed run: the newest record per (problem, effort) stands, as in
    :func:`outcomes`; one request's answer counts once, whatever efforts it stands for; an error
    (or an ungraded reply) is no answer."""
    unique = {id(r): r for r in newest_records(records).values()}
    return [r for r in unique.values() if not r.get("error") and r.get("correct") is not None]


def served_calibration(records: Sequence[Mapping[str, Any]], *, bins: int = 10, seed: int = 0,
                       resamples: int = BOOTSTRAP) -> dict[str, Any]:  # fmt: skip
    """How calibrated the served ``ttc.confidence`` is on these answers: ECE (``bins`` equal
    bins) with a 95% percentile bootstrap over problems, mean confidence against accuracy.
    One request's answer counts once, whatever efforts it stands for (they are one answer); an
    error is no answer, and an answer served without a confidence (no vote to read) is counted
    apart, never scored (:func:`answers`). Answers adopted from another run are counted apart
    too: that run's stack may have served another confidence model."""
    answered = answers(records)
    adopted = [r for r in answered if r.get("adopted_from")]
    answered = [r for r in answered if not r.get("adopted_from")]
    scored = [r for r in answered if r.get("confidence") is not None]
    out: dict[str, Any] = {"answers": len(answered), "without_confidence": len(answered) - len(scored),
                           "scored": len(scored), "adopted": len(adopted)}  # fmt: skip
    if not scored:
        return out | {"ece": None, "interval": None, "mean_confidence": None, "accuracy": None}
    probs = [float(r["confidence"]) for r in scored]
    right = [bool(r["correct"]) for r in scored]
    by_problem: dict[str, list[int]] = {}
    for i, r in enumerate(scored):
        by_problem.setdefault(str(r["problem_id"]), []).append(i)
    groups = list(by_problem.values())
    low, high = bootstrap_ece(probs, right, None, groups, seed=seed, resamples=resamples, bins=bins)
    return out | {"ece": expected_calibration_error(probs, right, bins=bins), "interval": (low, high),
                  "mean_confidence": float(np.mean(probs)), "accuracy": float(np.mean(right)),
                  "problems": len(groups)}  # fmt: skip

"""The report of ``python -m calibration routed``: live rows, the Must-show checks and the
offline-priced ladder on the same development problems (a second simulator check, for free).

The checks are :mod:`evaluation.heldout.checks`' own (one source of truth), decided on the live
rows; "routed within 3 points of the best fixed configuration within budget" compares the live
row with the best fixed configuration priced on the development pools of the same problems (no
fixed configuration runs live here), so it needs the fit this run's table came from.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from calibration.lib.fit import FittedPools
from calibration.lib.heldout_pricing import calibration_budgets, priced, routed
from evaluation.heldout.checks import all_checks
from evaluation.heldout.ladder import ladder, problem_budgets
from evaluation.heldout.ladder_report import HEADER, summary_row
from evaluation.heldout.routed_plan import error_counts, outcomes, served_calibration, summaries
from evaluation.pools.store import ProblemPool, task_type_of
from services.gateway.routing import RoutingTable


def offline_ladder(
    fitted: FittedPools,
    pools: Sequence[ProblemPool],
    efforts: Sequence[str],
    seed: int = 0,
    table: RoutingTable | None = None,
    large_pools: Sequence[ProblemPool] = (),
) -> dict[str, Any]:
    """The ladder priced on ``pools`` as ``development`` prices it (the fit's budgets; the routes of
    ``table``, the served one, else the fit's own; cascades priced where ``large_pools``, the
    escalation model's development pools, has the problem, unpriced elsewhere)."""
    table = table or RoutingTable.model_validate(fitted.fit.table)
    _, labels = routed(table, fitted, pools, efforts)
    _, outcomes = priced(pools, fitted, confidence=0.9, limit=64, seed=seed, large_pools=large_pools)
    budgets = calibration_budgets(fitted)
    return ladder(
        pools, labels, outcomes, problem_budgets({p.id: task_type_of(p) for p in pools}, budgets), efforts, seed
    )


def report(
    records: Sequence[Mapping[str, Any]],
    efforts: Sequence[str],
    headers: Sequence[Mapping[str, Any]],
    fitted: FittedPools | None,
    development: Sequence[ProblemPool],
    table: RoutingTable | None = None,
    large_pools: Sequence[ProblemPool] = (),
) -> dict[str, Any]:
    """``report.json``'s body, its Markdown included, from the run's ``records`` and chunk
    ``headers``: live rows per group and effort (:func:`~evaluation.heldout.routed_plan.summaries`),
    errors by kind, and the served confidence's calibration on these answers
    (:func:`~evaluation.heldout.routed_plan.served_calibration`); ``table``: the served table, when
    it is not the fit's own (the offline ladder routes by it); ``large_pools``: the escalation
    model's development pools (the offline ladder prices cascades on them)."""
    found = outcomes(records)
    live, errors = summaries(found, efforts), error_counts(found)
    served = served_calibration(records)
    ids = {pid for pid, _ in found}
    mine = [p for p in development if p.id in ids]
    offline: dict[str, Any] = {}
    if fitted is not None and mine:
        offline = offline_ladder(fitted, mine, efforts, table=table, large_pools=large_pools)
    groups = {g: {"routed": rows, "fixed": offline.get(g, {}).get("fixed", []),
                  "best_fixed": offline.get(g, {}).get("best_fixed", {})} for g, rows in live.items()}  # fmt: skip
    checks = all_checks(groups, efforts, len(ids), None, [])
    kinds = Counter(p.kind for p in mine)
    lines = [
        "# Development-split ladder measured through the gateway (routed by effort)",
        "",
        f"{len(ids)} development problems ({', '.join(f'{k} {n}' for k, n in kinds.items())}), "
        f"{len(headers)} chunks, code {sorted({str(h.get('git_describe')) for h in headers})}; "
        f"errors excluded, never wrong: {dict(errors) or 'none'}.",
        "",
        "## Must-show checks",
        "",
        *[c.line() for c in checks],
        "",
        *_served_lines(served),
    ]
    for group, rows in live.items():
        lines += [f"## {group}", "", HEADER]
        for effort, r in rows.items():
            errs = f" ({r.unpriced} errors)" if r.unpriced else ""
            lines.append(summary_row(r, f" live{errs}"))
            priced = offline.get(group, {}).get("routed", {}).get(effort)
            if priced is not None:
                lines.append(summary_row(priced, " offline-priced"))
        lines.append("")
    dump = {g: {e: r.as_dict() for e, r in rows.items()} for g, rows in live.items()}
    priced_dump = {g: {e: r.as_dict() for e, r in v["routed"].items()} for g, v in offline.items()}
    return {
        "provenance": {
            "chunks": len(headers),
            "chunk_code": sorted({str(h.get("git_describe")) for h in headers}),
            "settings": [h.get("settings") for h in headers[:1]],
        },
        "errors": dict(errors),
        "checks": [c.as_dict() for c in checks],
        "served_confidence": dict(served),
        "live": dump,
        "offline": priced_dump,
        "markdown": "\n".join(lines),
    }


def _served_lines(served: Mapping[str, Any]) -> list[str]:
    """The served ``ttc.confidence``'s calibration, one paragraph."""
    if served.get("ece") is None:
        return [f"Served `ttc.confidence`: no answer carried one ({served['answers']} answers).", ""]
    low, high = served["interval"]
    return [f"Served `ttc.confidence` on these answers: ECE {served['ece']:.3f} [{low:.3f}, {high:.3f}] over "
            f"{served['scored']} answers of {served['problems']} problems (mean confidence "
            f"{served['mean_confidence']:.2f} against accuracy {served['accuracy']:.2f}); "
            f"{served['without_confidence']} answers served without one"
            + (f"; {served['adopted']} adopted from another run, counted apart" if served.get("adopted") else "")
            + ".", ""]  # fmt: skip

"""The fitted ladder priced on pools the fit never saw: each problem routed as the gateway routes
it, the route's configuration priced on the problem's own pool, and the budgets the fit used.

Shared by the offline ladder on the development split (``development``), the offline-priced rows
beside a routed run's live ones (``routed``) and the leave-one-family-out folds (``lofo``), so
they price one ladder the same way. Routing loads the gateway's MiniLM encoder
(:mod:`~.gateway_routes`); the rest is :mod:`evaluation.heldout.ladder`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from calibration.lib.fit import FittedPools
from calibration.lib.gateway_routes import route_questions
from evaluation.heldout.ladder import Outcomes, fit_budgets, label_index, per_problem, routed_labels
from evaluation.heldout.lofo import with_candidates
from evaluation.pools.store import ProblemPool, task_type_of
from evaluation.pricing.pricer import Pricer, stop_rule
from evaluation.pricing.table import fit_latency, price_all
from evaluation.routing.escalation_join import adaptive_estimates, cascade_estimates, pair_of_label
from evaluation.routing.live_join import LiveSet, add_measured
from evaluation.routing.route_fit import problem_stats
from evaluation.routing.types import BUDGET_MULTIPLES, PREFILL_WEIGHT
from services.gateway.routing import Route, RoutingTable


def routed(
    table: RoutingTable, fitted: FittedPools, pools: Sequence[ProblemPool], efforts: Sequence[str]
) -> tuple[dict[str, dict[str, Route]], dict[str, dict[str, str | None]]]:
    """Each problem's route per effort under ``table`` (as the gateway routes its prompt) and the
    fit's configuration label each route runs."""
    routes = route_questions(table, {p.id: str(p.problem["question"]) for p in pools}, efforts)
    index = label_index(fitted.configs, fitted.pools, fitted.live.routes if fitted.live else None)
    labels = routed_labels({e: {pid: r.model_dump() for pid, r in per.items()} for e, per in routes.items()}, index)
    return routes, labels


def priced(
    pools: Sequence[ProblemPool], fitted: FittedPools, *, confidence: float, limit: int, seed: int,
    large_pools: Sequence[ProblemPool] = (),
) -> tuple[Pricer, Outcomes]:  # fmt: skip
    """Every configuration of the fit priced on ``pools`` (the latency model fitted on their own
    calls), with the fit's cascades where ``large_pools``, the larger model's pools of the same
    split, hold the problem."""
    pricer = Pricer(fit_latency(list(pools)), stop_rule(confidence), limit=limit, seed=seed)
    outcomes = Outcomes.of(pools, price_all(pricer, pools, fitted.configs), fitted.configs)
    add_cascades(outcomes, pools, large_pools, pricer, fitted, confidence=confidence, limit=limit, seed=seed)
    return pricer, outcomes


def add_cascades(outcomes: Outcomes, pools: Sequence[ProblemPool], large_pools: Sequence[ProblemPool],
                 pricer: Pricer, fitted: FittedPools, *, confidence: float, limit: int, seed: int) -> None:  # fmt: skip
    """Every cascade and escalating adaptive vote the fit could route to, priced on the problems
    drawn for both models, into ``outcomes`` (in place); nothing when the fit had none or the
    large model no pools of the split."""
    if not large_pools or fitted.live is None:
        return
    large = Pricer(fit_latency(large_pools), stop_rule(confidence), limit=limit, seed=seed)
    pairs = [p for label in fitted.live.routes if (p := pair_of_label(label, fitted.configs)) is not None]
    estimates = cascade_estimates(pools, large_pools, pricer, large, pairs)
    escalating = [c for c in fitted.configs if c.escalates and c.name in fitted.live.routes]
    estimates |= adaptive_estimates(pools, large_pools, pricer, large, escalating)
    add_measured(list(outcomes.stats.values()), LiveSet(estimates, {}), outcomes.latency, PREFILL_WEIGHT)


def calibration_budgets(fitted: FittedPools) -> dict[str, dict[str, float]]:
    """The budgets the fit used: ``BUDGET_MULTIPLES`` x one greedy sample's mean cost on the
    calibration problems of each task type."""
    greedy = [c for c in fitted.configs if c.family in ("cot_greedy", "code_greedy")]
    calibration = problem_stats(fitted.pools, price_all(fitted.pricer, fitted.pools, greedy), greedy)
    return fit_budgets(calibration, fitted.pools, BUDGET_MULTIPLES)


def priced_rows(
    table: RoutingTable, fitted: FittedPools, pools: Sequence[ProblemPool], efforts: Sequence[str], *,
    confidence: float, limit: int, seed: int,
) -> list[dict[str, Any]]:  # fmt: skip
    """Each problem of ``pools`` routed by ``table`` and its route priced on the problem's own
    pool: :func:`evaluation.heldout.ladder.per_problem`'s rows, each effort with the candidates
    its route asks for, and ``routes``: ``task_type`` when the table has routes of its own for the
    prompt's task type, ``default`` when the gateway falls back to the default routes."""
    routes, labels = routed(table, fitted, pools, efforts)
    sources = {e: {pid: r.expected.source.split("; ", 1)[-1] for pid, r in per.items() if r.expected}
               for e, per in routes.items()}  # fmt: skip
    _, outcomes = priced(pools, fitted, confidence=confidence, limit=limit, seed=seed)
    task_of = {p.id: task_type_of(p) for p in pools}
    rows = per_problem(pools, labels, outcomes, task_of, sources)
    dumped = {e: {pid: r.model_dump() for pid, r in per.items()} for e, per in routes.items()}
    own = set(table.task_routes)
    return [r | {"routes": "task_type" if r["task_type"] in own else "default"} for r in with_candidates(rows, dumped)]

"""The cascade onto a larger model as a configuration the ladder routes to (pure).

Whether escalating to a larger model pays, and at which efforts, is for calibration to decide
on both models' pools. The cascade is priced from the two pools
(:func:`evaluation.pricing.cascade.cascade`) on the problems drawn for both models, which are
fewer than the small model's (the larger model draws three times slower): exactly the shape of
the live tree strategies, measured on a subset. So each priced cascade joins the route fit as a
:class:`~.live_join.LiveSet` configuration: measured where both pools exist, imputed elsewhere by
the difference estimator of :mod:`~.live_join` (or left out of a group nothing imputes), and
routed as the served ``cascade`` route (:func:`evaluation.heldout.escalation.served_route`). On development
problems the same pricing gives a routed cascade its outcome where both pools exist; elsewhere
it is unpriced, never wrong.

The adaptive vote's ``escalate`` step (:mod:`services.search.strategies.adaptive`) is priced the
same way: an adaptive configuration whose order escalates is replayed on the small model's pool
with the larger model's sampled candidates of the same problem as the escalated draws
(:meth:`evaluation.pricing.pricer.Pricer.escalating`), measured where both pools exist and imputed
elsewhere, and routed as the served ``adaptive`` route with that order (:func:`adaptive_set`).

A table fitted with cascades routes requests to the escalation deployment, so it is served only
by a stack that has one (``TTC_ORCHESTRATOR_ESCALATION_MODEL``): it is a table of its own, never
the small model's default.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from evaluation.pools.store import ProblemPool
from evaluation.pricing.cascade import cascade, served_route
from evaluation.pricing.pricer import Config, Estimate, Pricer
from evaluation.routing.live_join import MIN_LIVE, LiveSet
from evaluation.routing.served_routes import route_of

THRESHOLDS = (0.5, 0.75, 0.9)
# The cascades calibration prices: the small model's configuration, then the large model's.
DEFAULT_PAIRS = (
    "pot@1->pot@4:es", "pot@1->pot@1", "pot@4:es->pot@4:es", "pot@4:es->pot@1", "pot@2->pot@1", "pot@3->pot@1",
    # the larger model's chains of thought (added after the first 16 development problems showed its
    # greedy chain of thought ahead of its programs: docs/strategies.md, "Escalation")
    "pot@1->cot_greedy", "pot@2->cot_greedy", "pot@3->cot_greedy", "pot@2->sc@4:es",
)  # fmt: skip


@dataclass(frozen=True)
class CascadePair:
    """One cascade: the small model's configuration, the large one's, the confidence threshold."""

    small: Config
    large: Config
    threshold: float

    @property
    def label(self) -> str:
        return f"cascade:{self.small.name}->{self.large.name}@{self.threshold:g}"


def pair_of_label(label: str, configs: Sequence[Config]) -> CascadePair | None:
    """The cascade a configuration label names (``cascade:<small>-><large>@<threshold>``, as
    :attr:`CascadePair.label` writes it), or ``None`` for another label or configurations not
    in ``configs``."""
    body = label.removeprefix("cascade:")
    spec, _, threshold = body.rpartition("@")
    small, sep, large = spec.partition("->")
    by_name = {c.name: c for c in configs}
    if body == label or not sep or small not in by_name or large not in by_name:
        return None
    try:
        return CascadePair(by_name[small], by_name[large], float(threshold))
    except ValueError:
        return None


def pairs_of(
    specs: Iterable[str], configs: Sequence[Config], thresholds: Sequence[float] = THRESHOLDS
) -> list[CascadePair]:
    """Every ``small->large`` spec (configuration names of ``configs``) at every threshold;
    raises ``ValueError`` naming a spec that does not parse."""
    by_name = {c.name: c for c in configs}
    pairs = []
    for spec in specs:
        small, sep, large = spec.partition("->")
        if not sep or small not in by_name or large not in by_name:
            raise ValueError(f"bad cascade pair {spec!r}: want small->large, each one of {', '.join(by_name)}")
        pairs += [CascadePair(by_name[small], by_name[large], t) for t in thresholds]
    return pairs


def cascade_estimates(
    small_pools: Sequence[ProblemPool], large_pools: Sequence[ProblemPool], small: Pricer, large: Pricer,
    pairs: Sequence[CascadePair],
) -> dict[str, dict[str, Estimate]]:  # fmt: skip
    """Label -> problem id -> the cascade's priced outcome, on the problems drawn for both models."""
    large_by_id = {p.id: p for p in large_pools}
    both = [(p, large_by_id[p.id]) for p in small_pools if p.id in large_by_id]
    out: dict[str, dict[str, Estimate]] = {}
    for pair in pairs:
        per = {}
        for s, la in both:
            e = cascade(small, large, s, la, pair.small, pair.large, pair.threshold)
            if e is not None:
                per[s.id] = e
        if per:
            out[pair.label] = per
    return out


def served_routes(
    pairs: Sequence[CascadePair], small_pools: Sequence[ProblemPool], large_pools: Sequence[ProblemPool]
) -> dict[str, dict[str, Any]]:
    """Label -> the served ``cascade`` route, for every pair the cascade strategy can run (its
    small side a vote: pairs it cannot serve are left out, so they never compete)."""
    routes = {}
    for pair in pairs:
        try:
            routes[pair.label] = served_route(route_of(pair.small, small_pools), route_of(pair.large, large_pools),
                                              pair.threshold)  # fmt: skip
        except ValueError:
            continue
    return routes


def escalation_set(
    small_pools: Sequence[ProblemPool], large_pools: Sequence[ProblemPool], small: Pricer, large: Pricer,
    pairs: Sequence[CascadePair], source: str, min_live: int = MIN_LIVE,
) -> LiveSet | None:  # fmt: skip
    """The servable cascades, priced where both models have pools, as the route fit takes them
    (``None``: no problem has both)."""
    routes = served_routes(pairs, small_pools, large_pools)
    estimates = cascade_estimates(small_pools, large_pools, small, large, [p for p in pairs if p.label in routes])
    if not estimates:
        return None
    return LiveSet(estimates, {label: routes[label] for label in estimates}, min_live, source)


def adaptive_estimates(
    small_pools: Sequence[ProblemPool], large_pools: Sequence[ProblemPool], small: Pricer, large: Pricer,
    configs: Sequence[Config],
) -> dict[str, dict[str, Estimate]]:  # fmt: skip
    """Label -> problem id -> the escalating adaptive configuration's priced outcome, on the
    problems drawn for both models."""
    large_by_id = {p.id: p for p in large_pools}
    both = [(p, large_by_id[p.id]) for p in small_pools if p.id in large_by_id]
    out: dict[str, dict[str, Estimate]] = {}
    for config in configs:
        per = {s.id: e for s, la in both if (e := small.escalating(s, config, la, large)) is not None}
        if per:
            out[config.name] = per
    return out


def adaptive_set(
    small_pools: Sequence[ProblemPool], large_pools: Sequence[ProblemPool], small: Pricer, large: Pricer,
    configs: Sequence[Config], source: str, min_live: int = MIN_LIVE,
) -> LiveSet | None:  # fmt: skip
    """The escalating adaptive configurations of ``configs``, priced where both models have
    pools, as the route fit takes them (``None``: none priced)."""
    escalating = [c for c in configs if c.escalates]
    estimates = adaptive_estimates(small_pools, large_pools, small, large, escalating)
    if not estimates:
        return None
    by_name = {c.name: c for c in escalating}
    routes = {label: route_of(by_name[label], small_pools) for label in estimates}
    return LiveSet(estimates, routes, min_live, source)


def merged(*sets: LiveSet | None) -> LiveSet | None:
    """One set with every configuration of ``sets`` (labels are distinct by construction: live
    names such as ``beam@4``, cascades ``cascade:…``), each keeping its own source; the smallest
    ``min_live`` of them."""
    present = [s for s in sets if s is not None]
    if not present:
        return None
    if len(present) == 1:
        return present[0]
    estimates = {k: v for s in present for k, v in s.estimates.items()}
    routes = {k: v for s in present for k, v in s.routes.items()}
    sources = {k: s.source_of(k) for s in present for k in s.estimates}
    return LiveSet(estimates, routes, min(s.min_live for s in present), "; ".join(s.source for s in present), sources)

"""Sequential and tree strategies, measured live (pure).

A pool cannot price beam search, DVTS, MCTS, AB-MCTS, revision or budget forcing: their later
calls depend on what earlier ones produced and on the verifier's scores. So they run live
through the gateway on a stated subset of calibration problems (``python -m calibration
live``) and their records join the priced configurations here:

- :data:`LIVE_CONFIGS`: the one list of live configuration names, each a :class:`LiveSpec`
  (strategy, ``n``, parameters, how many per-candidate caps its token budget holds), sized so a
  request stays within a minute or two on a 0.5B model on two CPU cores;
- :func:`live_pin`: the pinned gateway request, with the pools' temperature and per-answer cap
  (the validation's :class:`evaluation.heldout.simulator_check.GatewayPin`), and :func:`live_route`, the same as a
  routing-table route, so a fitted table can send an effort to a live configuration;
- :func:`stratified`: the subset, reproducible: the first ``limit`` pools in round-robin order
  over families (families in order of first appearance, problems in draw order), so every
  family is represented once the limit reaches the number of families;
- :func:`live_estimates`: the newest usable record per (problem, configuration) as a
  per-problem :class:`evaluation.pricing.pricer.Estimate` (accuracy 0 or 1, generated and prompt tokens,
  latency); infrastructure errors are excluded, never counted wrong;
- :func:`live_table`: pricing-table rows for the live configurations beside the priced ones on
  the same subset.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from evaluation.pools.store import ProblemPool
from evaluation.pricing.live_records import GatewayPin, LiveRecord, usable_records
from evaluation.pricing.pricer import Estimate
from evaluation.pricing.table import Row, table

ParamValue = bool | int | float | str


@dataclass(frozen=True)
class LiveSpec:
    """A live configuration: the strategy, its ``n`` and parameters, and ``caps``: how many
    per-answer caps (the pools' chain-of-thought ``max_tokens``) its token budget holds, so the
    budget never cuts a search that runs as specified."""

    strategy: str
    n: int
    caps: int
    params: Mapping[str, ParamValue] = field(default_factory=dict)


# Small searches: a 0.5B model decodes ~20 tokens/s on two cores, so each is a few thousand
# generated tokens at most. Tree searches use the strategies' default verifiers (PRM for beam
# and DVTS, ORM otherwise), which ``ttc stack`` serves on the policy model.
LIVE_CONFIGS: dict[str, LiveSpec] = {
    "beam@4": LiveSpec("beam_search", 4, 6, {"max_steps": 6}),
    "dvts@4": LiveSpec("dvts", 4, 6, {"max_steps": 6}),
    "mcts@8": LiveSpec("mcts", 8, 8, {"expansion_width": 2}),
    "ab_mcts_a@8": LiveSpec("ab_mcts_a", 8, 8),
    "revision@3": LiveSpec("revision", 1, 4, {"rounds": 3}),
    "budget_forcing@2": LiveSpec("budget_forcing", 1, 3, {"max_waits": 2}),
}


class UnknownLive(ValueError):
    """A name that is not one of :data:`LIVE_CONFIGS`."""


def spec_of(name: str) -> LiveSpec:
    if name not in LIVE_CONFIGS:
        raise UnknownLive(f"{name!r} is not a live configuration; known: {', '.join(LIVE_CONFIGS)}")
    return LIVE_CONFIGS[name]


def live_pin(name: str, settings: Mapping[str, Any]) -> GatewayPin:
    """The pinned request of live configuration ``name`` given the pools' draw ``settings``
    (temperature and ``cot_max_tokens`` as :func:`evaluation.heldout.simulator_check.gateway_pin` reads them)."""
    spec = spec_of(name)
    cap = int(settings.get("cot_max_tokens", 1024))
    temperature = float(settings.get("temperature", 0.7))
    return GatewayPin(spec.strategy, spec.n, spec.caps * cap, temperature, cap, dict(spec.params))


def pin_route(pin: GatewayPin) -> dict[str, Any]:
    """The routing-table route that runs ``pin`` (``route_of``'s shape): what was measured."""
    return {"strategy": pin.strategy, "n": pin.n, "params": dict(pin.params), "token_budget": pin.token_budget}


def live_route(name: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    return pin_route(live_pin(name, settings))


def stratified(pools: Sequence[ProblemPool], limit: int) -> list[ProblemPool]:
    """The first ``limit`` pools (0: all) taken round-robin over families: the first of each
    family, then the second of each, and so on (families in order of first appearance)."""
    by_family: dict[str, list[ProblemPool]] = {}
    for p in pools:
        by_family.setdefault(p.family, []).append(p)
    order: list[ProblemPool] = []
    depth = max((len(v) for v in by_family.values()), default=0)
    for i in range(depth):
        order += [members[i] for members in by_family.values() if i < len(members)]
    return order[:limit] if limit else order


def live_estimates(records: Iterable[LiveRecord], names: Sequence[str]) -> dict[str, dict[str, Estimate]]:
    """Live configuration -> problem id -> its measured outcome (newest usable record)."""
    records = list(records)
    out: dict[str, dict[str, Estimate]] = {}
    for name in names:
        usable, _ = usable_records(records, name)
        if usable:
            out[name] = {
                r.problem_id: Estimate(
                    accuracy=1.0 if r.correct else 0.0,
                    generated=float(r.completion_tokens),
                    prompt=float(r.prompt_tokens),
                    latency_s=r.latency_s,
                )
                for r in usable
            }
    return out


def live_table(
    pools: Sequence[ProblemPool], priced: Mapping[str, Mapping[str, Estimate]],
    live: Mapping[str, Mapping[str, Estimate]], seed: int = 0,
) -> list[Row]:  # fmt: skip
    """Pricing-table rows on the live subset (the problems any live configuration answered):
    each live configuration over the problems it answered, every priced configuration over the
    same subset, with the same intervals (:func:`evaluation.pricing.table.table`), so like is compared
    with like."""
    measured = {pid for per in live.values() for pid in per}
    subset = [p for p in pools if p.id in measured]
    both = {name: dict(per) for name, per in priced.items()} | {name: dict(per) for name, per in live.items()}
    return [replace(r, group=f"live subset: {r.group}") for r in table(subset, both, seed)]

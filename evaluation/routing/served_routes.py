"""The gateway route that runs a priced configuration as it was priced.

A fitted table names routes, not configurations: each priced configuration maps onto the
strategy, ``n``, parameters and verifier the gateway runs (:func:`route_of`), with a token budget
that holds every candidate at the per-candidate cap the pools were drawn with (:func:`token_cap`),
so the budget never cuts what was priced. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evaluation.pools.store import ProblemPool
from evaluation.pricing.pricer import Config
from services.search.strategies.code_execution import TESTS_MAX_TOKENS


def route_of(config: Config, pools: Sequence[ProblemPool]) -> dict[str, Any]:
    """The gateway route that runs ``config`` as it was priced. ``token_budget`` is every
    candidate the configuration draws at the per-candidate cap the pools were drawn with, so
    the cap never cuts what was priced (the effort's budget is a mean, not a per-request cap)."""
    f = config.family
    if f in ("cot_greedy", "code_greedy"):
        route: dict[str, Any] = {"strategy": "single", "n": 1, "params": {"greedy": True}}
    elif f == "sc":
        params: dict[str, Any] = {"early_stop": True, "first_wave": config.first_wave} if config.early_stop else {}
        route = {"strategy": "self_consistency", "n": config.n, "params": params}
    elif f == "pot":
        params = {"early_stop": config.early_stop}
        if config.early_stop:
            params["first_wave"] = config.first_wave
        if config.cot:
            params |= {"mode": "hybrid", "cot": config.cot, "cot_weight": config.cot_weight}
        route = {"strategy": "program_of_thought", "n": config.n, "params": params}
    elif f in ("bon", "wvote"):
        route = {"strategy": "best_of_n" if f == "bon" else "weighted_vote", "n": config.n, "verifier": config.judge}
    elif f == "code_exec":
        route = {"strategy": "code_execution", "n": config.n}
    elif f == "adaptive":
        params = {"start": config.start, "first_wave": config.first_wave, "steps": config.steps,
                  "confidence": config.confidence, "thought_weight": config.cot_weight}  # fmt: skip
        route = {"strategy": "adaptive", "n": config.n, "params": params}
    else:
        raise ValueError(f"{config.name}: {f} is not a strategy a route can run")
    route["token_budget"] = max(1, token_cap(config, pools))
    return route


def _cap(pools: Sequence[ProblemPool], kind: str, call: int) -> int:
    return max((p.draws[kind].calls[call].max_tokens for p in pools if kind in p.draws), default=0)


def token_cap(config: Config, pools: Sequence[ProblemPool]) -> int:
    """Generated tokens of the configuration's candidates at the pools' per-candidate caps."""
    f = config.family
    if f in ("cot_greedy", "code_greedy"):
        return max(_cap(pools, "cot", 0), _cap(pools, "code", 0))
    if f == "code_exec":  # n completions and the test-writing call, capped as the strategy caps it
        cap = _cap(pools, "code", -1)
        return config.n * cap + min(cap, TESTS_MAX_TOKENS)
    if f == "adaptive":  # at most every candidate of the cap, at the longer modality's cap
        return config.n * max(_cap(pools, "program", -1), _cap(pools, "cot", -1))
    if f == "pot":
        fallback = _cap(pools, "cot", 0) if config.cot == 0 else 0
        return config.n * _cap(pools, "program", -1) + config.cot * _cap(pools, "cot", -1) + fallback
    return config.n * _cap(pools, "cot", -1)

"""The cascade onto a larger model, priced from both models' pools, and the route that serves it.

The small model's configuration runs first; where its vote is unsettled by the served rule (its
calibrated confidence below a threshold, or no answer) the large model's configuration answers
too and both spends count (:func:`cascade`). :func:`served_route` is the gateway's ``cascade``
route for a priced pair, so a fitted table can route an effort to it. Pure.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from evaluation.pools.store import ProblemPool, prompt_text
from evaluation.pricing.pricer import Config, Estimate, Outcome, Pricer, confidence_family, mean_estimate
from services.common.confidence import shipped
from services.common.confidence_prompt import with_prompt
from services.search.strategies.signals import unanimous


def cascade(small: Pricer, large: Pricer, small_pool: ProblemPool, large_pool: ProblemPool, small_config: Config,
            large_config: Config, threshold: float) -> Estimate | None:  # fmt: skip
    """The small model's configuration; when its vote is unsettled the large model's
    configuration answers too, and both spends count; where even a unanimous small vote would be
    unsettled (:func:`hopeless`), only the large configuration runs. Unsettled is the served cascade's rule
    (``services/search/strategies/cascade.py``): the small run's calibrated confidence (the
    shipped model, ``services/common/confidence.py``, on the run's signals and what the prompt
    says: its task type and prior, ``services/common/confidence_prompt.py``) is
    below ``threshold``, or the run has no answer. The two pools are independent draws, so the
    large model's expected outcome applies."""
    if not small_config.applies(small_pool):
        return None
    after = large.estimate(large_pool, large_config)
    if after is None:
        return None
    text = prompt_text(small_pool)
    if hopeless(small_config, text, threshold):
        return replace(after, escalated=1.0)  # the small run is skipped: only the large one spends
    rng = random.Random(f"{small.seed}:{small_pool.id}:{small_config.name}")
    runs = list(small.outcomes(small_pool, small_config, rng))
    base = mean_estimate(runs)
    escalated = [unsettled(o, threshold, text) for o in runs]
    share = sum(escalated) / len(runs)
    right = sum(after.accuracy if e else float(o.correct) for o, e in zip(runs, escalated, strict=True)) / len(runs)
    return Estimate(
        accuracy=right,
        generated=base.generated + share * after.generated,
        prompt=base.prompt + share * after.prompt,
        latency_s=base.latency_s + share * after.latency_s,
        escalated=share,
    )


def hopeless(config: Config, text: str, threshold: float) -> bool:
    """Whether even a unanimous vote of ``config`` on the prompt ``text`` would be below
    ``threshold``: the served cascade then skips its small run (``strategies/cascade.py``)."""
    if config.family not in ("pot", "sc"):
        return False  # the served cascade's inner strategies are program-of-thought and self-consistency
    model = shipped()
    best = unanimous(confidence_family(config), config.n + config.cot, config.cot)
    return model.probability(with_prompt(best, text, model)) < threshold


def unsettled(run: Outcome, threshold: float, text: str) -> bool:
    """Whether the cascade escalates after ``run`` on the prompt ``text``: no answer, or its
    served confidence below ``threshold`` (the vote share where a run carries no signals, as the
    oracle ``code_pass`` does)."""
    if run.agreement == 0.0:
        return True
    if run.signals is None:
        return run.agreement < threshold
    model = shipped()
    return model.probability(with_prompt(run.signals, text, model)) < threshold


def served_route(small_route: dict[str, Any], large_route: dict[str, Any], threshold: float) -> dict[str, Any]:
    """The served ``cascade`` route for a priced pair, from each side's route
    (:func:`evaluation.routing.served_routes.route_of`): the small route's strategy is ``inner``, the large
    one's runs on the escalation deployment (``large_inner``, ``large_n``, ``large_params``), and
    the budget holds both. Raises ``ValueError`` where the small side is no vote the cascade runs."""
    inners = ("program_of_thought", "self_consistency")
    if small_route["strategy"] not in inners:
        raise ValueError(f"the cascade's small side must be one of {', '.join(inners)}, not {small_route['strategy']}")
    params = {
        "inner": small_route["strategy"],
        "threshold": threshold,
        **small_route.get("params", {}),
        "large_inner": large_route["strategy"],
        "large_n": large_route["n"],
        "large_params": dict(large_route.get("params", {})),
    }
    return {
        "strategy": "cascade",
        "n": small_route["n"],
        "params": params,
        "token_budget": small_route["token_budget"] + large_route["token_budget"],
    }

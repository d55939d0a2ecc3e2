"""The one routing fit every verb shares: price every calibration pool, let the live tree
strategies and the cascades onto a larger model compete, fit the routes.

``calibrate`` writes the fit as a routing table, ``development`` scores it on the development split's pools and
``routed`` serves it through the gateway; all three call :func:`fit_pools`, so they can never
disagree on what was fitted. The fit itself is pure (:func:`evaluation.routing.route_fit.fit`);
this reads the pools and live records from disk and embeds the prompts with the gateway's
MiniLM encoder (:func:`evaluation.routing.embeddings.feature_rows`).
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from calibration.lib.paths import DEFAULT_LIVE, relative_to_root
from calibration.lib.records import read_records
from evaluation.pools.provenance import git_describe
from evaluation.pools.store import ProblemPool, iter_chunks, read_pools
from evaluation.pricing.live_configs import LIVE_CONFIGS, live_estimates, pin_route
from evaluation.pricing.live_records import GatewayPin, LiveRecord
from evaluation.pricing.pricer import Config, Pricer, stop_rule
from evaluation.pricing.table import ESCALATING_ORDERS, adaptive_configs, default_configs, fit_latency, judges_in
from evaluation.routing.embeddings import feature_rows
from evaluation.routing.escalation_join import DEFAULT_PAIRS, adaptive_set, escalation_set, merged, pairs_of
from evaluation.routing.fit_provenance import pools_provenance, source_line
from evaluation.routing.live_join import LiveSet
from evaluation.routing.route_fit import Fit, FitSettings, fit


@dataclass(frozen=True)
class FittedPools:
    """A fit and what it was made from: the calibration pools, their pricer and configurations."""

    fit: Fit
    pools: list[ProblemPool]
    pricer: Pricer
    configs: list[Config]
    live: LiveSet | None = None
    large_pricer: Pricer | None = None  # the escalation model's, when cascades competed


def fit_pools(
    pools_dir: Path, model: str, *, estimator: str = "embedding", confidence: float = 0.9, limit: int = 64,
    seed: int = 0, live_dir: Path | None = None, large_pools_dir: Path | None = None,
    leave_out: Collection[str] = (),
) -> FittedPools:  # fmt: skip
    """Price and fit on every calibration pool in ``pools_dir``: the one fit ``calibrate`` writes
    and ``development`` scores (so the two can never disagree on what was fitted). ``live_dir``: the
    live records of sequential and tree strategies (default ``docs/data/calibration/live/<model>``
    when it exists), competing in the fit (:mod:`evaluation.routing.live_join`). ``large_pools_dir``: a
    larger model's pools; every servable cascade onto it, and every adaptive order with an
    ``escalate`` step, competes the same way, measured where both models have calibration pools
    (:mod:`evaluation.routing.escalation_join`). ``leave_out``:
    families whose calibration pools the fit does not see (leave-one-family-out judges routing on
    a family it was not fitted on; the estimator and budgets are refitted without them too)."""
    pools = [p for p in read_pools(pools_dir, "calibration") if p.family not in leave_out]
    if not pools:
        raise SystemExit(f"error: no calibration pools in {pools_dir}: draw some first (a longer --hours?)")
    chunks = list(iter_chunks(pools_dir, "calibration"))
    k = min(len(d.sampled) for p in pools for d in p.draws.values())
    pricer = Pricer(fit_latency(pools), stop_rule(confidence), limit=limit, seed=seed)
    label = relative_to_root(pools_dir)
    provenance = pools_provenance(label, chunks, pools)
    provenance |= {"fitted_by": git_describe(), "fitted_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "latency_model": pricer.latency.__dict__, "k": k, "served_model": model}  # fmt: skip
    if leave_out:
        provenance["left_out_families"] = sorted(leave_out)
    features = feature_rows([str(p.problem["question"]) for p in pools]) if estimator == "embedding" else None
    source = source_line(label, pools, provenance["program_version"])
    configs = default_configs(k, judges_in(pools))
    live_dir = live_dir or DEFAULT_LIVE / model
    live = live_set(live_dir, relative_to_root(live_dir)) if live_dir.is_dir() else None
    large_pricer = None
    if large_pools_dir is not None:
        large_pools = read_pools(large_pools_dir, "calibration")
        if not large_pools:
            raise SystemExit(f"error: no calibration pools in {large_pools_dir}: the cascade cannot be priced")
        large_pricer = Pricer(fit_latency(large_pools), stop_rule(confidence), limit=limit, seed=seed)
        large_label = relative_to_root(large_pools_dir)
        escalation = escalation_set(pools, large_pools, pricer, large_pricer, pairs_of(DEFAULT_PAIRS, configs),
                                    f"priced from both models' pools, {large_label}")  # fmt: skip
        configs += adaptive_configs(ESCALATING_ORDERS)  # the adaptive vote's escalate step, priced on both pools
        adaptive = adaptive_set(pools, large_pools, pricer, large_pricer, configs,
                                f"adaptive replay on both models' pools, {large_label}")  # fmt: skip
        live = merged(live, escalation, adaptive)
        provenance["escalation"] = pools_provenance(large_label, list(iter_chunks(large_pools_dir, "calibration")),
                                                    large_pools)  # fmt: skip
    result = fit(pools, pricer, configs, features=features, settings=FitSettings(seed=seed), provenance=provenance,
                 source=source, live=live)  # fmt: skip
    if large_pools_dir is not None:
        models = provenance["escalation"]["model"]
        if len(models) != 1:
            raise SystemExit(f"error: {large_pools_dir} holds pools of {len(models)} models ({models}): want one")
        result.table["escalation_model"] = models[0]  # what the cascade routes escalate to
    return FittedPools(result, pools, pricer, configs, live, large_pricer)


def live_set(directory: Path, source: str = "") -> LiveSet | None:
    """The live records in ``directory`` as the route fit takes them (``None``: none there):
    each configuration's estimates and the route its newest chunk's pin runs."""
    records, headers, _ = read_records(directory)
    pins: dict[str, dict[str, Any]] = {}
    for h in headers:
        pins |= dict((h.get("settings") or {}).get("pins") or {})
    estimates = live_estimates([LiveRecord.from_dict(r) for r in records], [n for n in pins if n in LIVE_CONFIGS])
    if not estimates:
        return None
    routes = {name: pin_route(GatewayPin(**pins[name])) for name in estimates}
    return LiveSet(estimates, routes, source=f"live: {source or directory}")

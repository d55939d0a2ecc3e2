"""Tables of priced configurations: every configuration on every problem of a pool, means per
task kind and overall with bootstrap intervals over problems, and the latency model fitted on
the calls the pools' engine made alone. The cascade onto a larger model is priced in
:mod:`~.cascade`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from evaluation.pools.store import Call, ProblemPool
from evaluation.pricing.pricer import Config, Estimate, LatencyModel, Pricer
from evaluation.stats.intervals import bootstrap_interval


def fit_latency(pools: Sequence[ProblemPool]) -> LatencyModel:
    """Least squares of calls' wall seconds on (uncached prompt tokens, longest candidate's
    tokens, that times the extra sequences), coefficients kept non-negative (a coefficient that
    fits negative is dropped and the rest refitted). The calls are those made alone: the pools'
    calls that did not overlap others, and the latency probes of overlapped sittings (each
    probe once, however many pools carry it)."""
    rows, walls = [], []
    probes: dict[tuple[float, int, int, int], Call] = {}
    for pool in pools:
        for probe in pool.latency_probe:
            probes.setdefault((probe.wall_s, probe.n, probe.prompt_tokens, probe.longest), probe)
        for draw in pool.draws.values():
            for index, call in enumerate(draw.calls):
                if call.overlapped:
                    continue
                longest = max((c.completion_tokens for c in draw.candidates if c.call == index), default=0)
                rows.append([max(0, call.prompt_tokens - call.cached_tokens), longest, longest * (call.n - 1)])
                walls.append(call.wall_s)
    for probe in probes.values():
        rows.append([max(0, probe.prompt_tokens - probe.cached_tokens), probe.longest, probe.longest * (probe.n - 1)])
        walls.append(probe.wall_s)
    if not rows:
        return LatencyModel()
    x, y = np.array(rows, dtype=float), np.array(walls, dtype=float)
    active = [0, 1, 2]
    coef = np.zeros(3)
    while active:
        solution, *_ = np.linalg.lstsq(x[:, active], y, rcond=None)
        if (solution >= 0).all():
            coef[:] = 0.0
            coef[active] = solution
            break
        active = [a for a, s in zip(active, solution, strict=True) if s >= 0]
    return LatencyModel(float(coef[0]), float(coef[1]), float(coef[2]))


def default_configs(k: int, judges: Sequence[str] = ()) -> list[Config]:
    """Every parallel configuration a pool of ``k`` sampled candidates prices, every n up to k."""
    configs = [Config("cot_greedy", "cot_greedy"), Config("code_greedy", "code_greedy")]
    for n in range(1, k + 1):
        configs.append(Config(f"sc@{n}", "sc", n))
        if n > 3:
            configs.append(Config(f"sc@{n}:es", "sc", n, early_stop=True))
        configs += [Config(f"code_vote@{n}", "code_vote", n), Config(f"code_pass@{n}", "code_pass", n)]
        configs += [Config(f"bon@{n}:{j}", "bon", n, judge=j) for j in judges]
        configs += [Config(f"wvote@{n}:{j}", "wvote", n, judge=j) for j in judges]
    for n in range(1, k + 2):  # the greedy candidate and up to k sampled ones
        configs.append(Config(f"code_exec@{n}", "code_exec", n))
        configs.append(Config(f"pot@{n}", "pot", n))
        if n > 3:
            configs.append(Config(f"pot@{n}:es", "pot", n, early_stop=True))
        configs.append(Config(f"hybrid@{n}+cot2", "pot", n, cot=2))
        if n in (1, 2, 4, 8) and k >= 4:
            configs.append(Config(f"hybrid@{n}+cot4", "pot", n, cot=4))
    return configs + adaptive_configs()


# The adaptive vote's grid (evaluation/routing/adaptive_fit.py chooses in it): caps doubling from
# ``medium`` up, stop confidences, step orders, starting modalities and the thoughts' weights.
ADAPTIVE_CAPS = (4, 8, 16)
ADAPTIVE_CONFIDENCES = (0.8, 0.9, 0.95, 0.99)
ADAPTIVE_ORDERS = ("other,more", "more,other", "more")
ADAPTIVE_STARTS = ("program", "thought")
ADAPTIVE_WEIGHTS = (0.5, 1.0)


ESCALATING_ORDERS = ("other,escalate", "escalate,more", "more,escalate")


def adaptive_configs(orders: Sequence[str] = ADAPTIVE_ORDERS) -> list[Config]:
    """Every adaptive configuration of the grid with one of ``orders`` (default: those one model
    serves; :data:`ESCALATING_ORDERS` where a larger deployment is served beside), labelled
    ``adaptive@<cap>:<start>:<steps>:w<weight>:c<confidence>``."""
    return [
        Config(
            f"adaptive@{cap}:{start}:{steps}:w{weight:g}:c{c:g}",
            "adaptive",
            cap,
            cot_weight=weight,
            first_wave=2,
            start=start,
            steps=steps,
            confidence=c,
        )
        for cap in ADAPTIVE_CAPS
        for start in ADAPTIVE_STARTS
        for steps in orders
        for weight in ADAPTIVE_WEIGHTS
        for c in ADAPTIVE_CONFIDENCES
    ]


def judges_in(pools: Sequence[ProblemPool]) -> list[str]:
    names = {j for p in pools for d in p.draws.values() for c in d.candidates for j in c.scores}
    return sorted(names)


@dataclass(frozen=True)
class Row:
    group: str
    config: str
    problems: int
    accuracy: float
    low: float
    high: float
    generated: float
    prompt: float
    latency_s: float
    latency_p50_s: float
    escalated: float

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def summarize(group: str, config: str, estimates: Sequence[Estimate], seed: int = 0) -> Row:
    acc = [e.accuracy for e in estimates]
    low, high = bootstrap_interval(acc, seed=seed)
    m = len(estimates)
    return Row(
        group=group, config=config, problems=m, accuracy=sum(acc) / m, low=low, high=high,
        generated=sum(e.generated for e in estimates) / m, prompt=sum(e.prompt for e in estimates) / m,
        latency_s=sum(e.latency_s for e in estimates) / m,
        latency_p50_s=float(np.median([e.latency_s for e in estimates])),
        escalated=sum(e.escalated for e in estimates) / m,
    )  # fmt: skip


def price_all(
    pricer: Pricer, pools: Sequence[ProblemPool], configs: Sequence[Config]
) -> dict[str, dict[str, Estimate]]:
    """Configuration name -> problem id -> estimate, for every pair where the configuration applies."""
    priced: dict[str, dict[str, Estimate]] = {}
    for config in configs:
        for pool in pools:
            estimate = pricer.estimate(pool, config)
            if estimate is not None:
                priced.setdefault(config.name, {})[pool.id] = estimate
    return priced


def table(pools: Sequence[ProblemPool], priced: dict[str, dict[str, Estimate]], seed: int = 0) -> list[Row]:
    """Rows per task kind (in order of first appearance) and overall, for every configuration."""
    kinds = list(dict.fromkeys(p.kind for p in pools))
    rows = []
    for group in [*kinds, "all"]:
        members = {p.id for p in pools if group in ("all", p.kind)}
        for name, per_problem in priced.items():
            estimates = [e for pid, e in per_problem.items() if pid in members]
            if estimates:
                rows.append(summarize(group, name, estimates, seed))
    return rows

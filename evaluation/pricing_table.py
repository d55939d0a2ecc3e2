"""Tables of priced configurations: every configuration on every problem of a pool, means per
task kind and overall with bootstrap intervals over problems, the latency model fitted on the
calls the pools' engine made alone, and the cascade (small model, then the large one when the vote is unsettled).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np

from evaluation.intervals import bootstrap_interval
from evaluation.pools import Call, ProblemPool, prompt_text
from evaluation.pricing import Config, Estimate, LatencyModel, Outcome, Pricer, confidence_family, mean_estimate
from services.common.confidence import shipped
from services.common.confidence_prompt import with_prompt
from services.search.strategies.signals import unanimous


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
    for n in range(1, k + 2):
        configs.append(Config(f"pot@{n}", "pot", n))
        if n > 3:
            configs.append(Config(f"pot@{n}:es", "pot", n, early_stop=True))
        configs.append(Config(f"hybrid@{n}+cot2", "pot", n, cot=2))
        if n in (1, 2, 4, 8) and k >= 4:
            configs.append(Config(f"hybrid@{n}+cot4", "pot", n, cot=4))
    return configs


def judges_in(pools: Sequence[ProblemPool]) -> list[str]:
    names = {j for p in pools for d in p.draws.values() for c in d.candidates for j in c.scores}
    return sorted(names)


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

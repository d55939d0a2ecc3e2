"""The routing table learned from calibration pools: pools in, a table out.

Every configuration is priced offline on every calibration pool (:mod:`evaluation.pricing.pricer`); each
problem then carries one :class:`evaluation.routing.types.ProblemStats` of priced configurations, and the
choice rule is calibration's own (:func:`~.route_choice.best`): per effort, the configuration
with the best mean accuracy whose mean cost (generated + ``prefill_weight`` x prompt tokens)
fits the effort's budget. Budgets are :data:`evaluation.routing.types.BUDGET_MULTIPLES` of one greedy
sample's mean cost on the same problems, so they double from ``minimal`` and never fall;
``none`` is pinned to one greedy sample whatever is cheaper.

Groups are the gateway's task types: each problem's prompt goes through the gateway's own
classifier (``classify_task(estimation_text(...))``), so a route fitted on a family is the
route its prompts get at serve time. A task type with calibration problems gets routes of its
own (``task_routes``), per difficulty bin where a bin holds enough problems; the default
``routes``, which serve every task type calibration never saw, are the configuration best on
average across families (each family weighs one, so a family with many problems does not
decide alone), fitted on the families answered in text (code needs code configurations: on
code prompts the greedy completion competes with ``code_execution``, priced from the
candidates' recorded behaviour on the model's own test inputs, :mod:`evaluation.pricing.code_exec`).

The difficulty estimator, when embedding features are given, is a ridge on 1 - pass@1 of the
pool's candidates (the gateway's zero-token estimator; bins at calibration quantiles). Every
route carries ``expected``: its accuracy with a 95% bootstrap interval over the problems it
was fitted on, mean generated and prompt tokens and the median latency the pool's latency
model gives. Only configurations priced on every problem of a group compete in it, so a
configuration that applies to a few problems cannot win on those alone.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evaluation.pools.store import ProblemPool, task_type_of
from evaluation.pricing.pricer import Config, Estimate, Pricer
from evaluation.pricing.table import price_all
from evaluation.routing.adaptive_fit import adaptive_routes, is_adaptive
from evaluation.routing.difficulty import difficulty_bin, fit_ridge, quantile_edges, strictly_rising
from evaluation.routing.live_join import LiveSet, join
from evaluation.routing.live_join import provenance as live_provenance
from evaluation.routing.route_choice import DEFAULT_Z, Guessed, best, choose_stable, effort_budgets
from evaluation.routing.served_routes import route_of
from evaluation.routing.types import ANY_BIN, BUDGET_MULTIPLES, PREFILL_WEIGHT, Choice, ConfigStats, ProblemStats
from evaluation.stats.intervals import bootstrap_interval
from services.common.difficulty_features import FEATURE_SET

GREEDY = "greedy"  # one greedy sample: cot_greedy on text problems, code_greedy on code ones
TABLE_VERSION = 3
# pass@n is an oracle (a right candidate exists), not a strategy; a vote on code text is what no
# strategy runs (code_execution chooses by behaviour, priced as ``code_exec``)
NOT_ROUTABLE = frozenset({"code_pass", "code_vote"})
BIN_NAMES = ("easy", "medium", "hard")


@dataclass(frozen=True)
class FitSettings:
    """How routes are fitted. ``min_bin_problems``: a bin with fewer problems takes its task
    type's all-problem choice; ``min_task_problems``: a task type with fewer calibration
    problems gets the default routes."""

    multiples: Mapping[str, float] = field(default_factory=lambda: dict(BUDGET_MULTIPLES))
    prefill_weight: float = PREFILL_WEIGHT
    min_bin_problems: int = 3
    min_task_problems: int = 1
    bins: tuple[str, ...] = BIN_NAMES
    switch_z: float = DEFAULT_Z  # a route leaves its parent's or lower effort's choice only by this margin
    ridge_alpha: float = 10.0
    seed: int = 0


@dataclass(frozen=True)
class Fit:
    """The table (a dict that validates as ``services.gateway.routing.RoutingTable``) and one
    prediction per calibration problem (its task type, estimated difficulty, bin, and what each
    effort routes it to with that configuration's priced outcome on it)."""

    table: dict[str, Any]
    predictions: list[dict[str, Any]]


def label_of(config: Config) -> str:
    """The configuration's label in stats: both greedy configurations are the one greedy sample."""
    return GREEDY if config.family in ("cot_greedy", "code_greedy") else config.name


# ------------------------------------------------------------------------------ stats
def pass1(pool: ProblemPool) -> float:
    """Mean correctness of the problem's candidates (chains of thought, or code completions)."""
    draw = pool.draws.get("code") or pool.draws.get("cot") or next(iter(pool.draws.values()))
    return float(np.mean([bool(c.correct) for c in draw.candidates])) if draw.candidates else 0.0


def problem_stats(
    pools: Sequence[ProblemPool], priced: Mapping[str, Mapping[str, Estimate]], configs: Sequence[Config],
    prefill_weight: float = PREFILL_WEIGHT,
) -> list[ProblemStats]:  # fmt: skip
    """One :class:`ProblemStats` per pool, its configurations priced (labels per :func:`label_of`)."""
    by_name = {c.name: c for c in configs}
    out = []
    for pool in pools:
        stats = ProblemStats(pool.id, str(pool.problem["question"]), int(pool.problem.get("level", 0)))
        stats.pass1 = pass1(pool)
        for name, per_problem in priced.items():
            estimate = per_problem.get(pool.id)
            if estimate is None or by_name[name].family in NOT_ROUTABLE:
                continue
            stats.configs[label_of(by_name[name])] = ConfigStats(
                accuracy=estimate.accuracy,
                tokens=estimate.generated + prefill_weight * estimate.prompt,
                requests=1,
                prompt_tokens=estimate.prompt,
                generated_tokens=estimate.generated,
                candidates=estimate.candidates,
            )
        out.append(stats)
    return out


def covering(stats: Sequence[ProblemStats]) -> list[str]:
    """Configurations priced on every one of ``stats`` (only they compete there)."""
    if not stats:
        return []
    common = set(stats[0].configs)
    for s in stats[1:]:
        common &= set(s.configs)
    return sorted(common)


def family_stats(stats: Sequence[ProblemStats], family_of: Mapping[str, str]) -> list[ProblemStats]:
    """One pseudo-problem per family, its configurations' means over the family's problems,
    so that choosing on them is choosing on the average across families."""
    out = []
    for family in dict.fromkeys(family_of[s.problem_id] for s in stats):
        members = [s for s in stats if family_of[s.problem_id] == family]
        merged = ProblemStats(family, family, 0)
        for label in covering(members):
            cs = [m.configs[label] for m in members]
            merged.configs[label] = ConfigStats(
                accuracy=float(np.mean([c.accuracy for c in cs])), tokens=float(np.mean([c.tokens for c in cs])),
                requests=len(cs), prompt_tokens=float(np.mean([c.prompt_tokens for c in cs])),
                generated_tokens=float(np.mean([c.generated_tokens for c in cs])),
            )  # fmt: skip
        out.append(merged)
    return out


def guessed_families(
    imputed: Mapping[str, Mapping[str, str]], stats: Sequence[ProblemStats], family_of: Mapping[str, str]
) -> dict[str, set[str]]:
    """Per live or cascade configuration, the families (:func:`family_stats`' pseudo-problems)
    on none of whose problems in ``stats`` it was measured: their means are imputation only."""
    members: dict[str, set[str]] = {}
    for st in stats:
        members.setdefault(family_of[st.problem_id], set()).add(st.problem_id)
    return {label: {f for f, ids in members.items() if ids <= set(guessed)} for label, guessed in imputed.items()}


def budgets_for(stats: Sequence[ProblemStats], multiples: Mapping[str, float]) -> dict[str, float]:
    """The efforts' budgets on ``stats``; the multiples must not fall from one effort to the next."""
    values = list(multiples.values())
    if any(b < a for a, b in itertools.pairwise(values)):
        raise ValueError(f"budget multiples must not decrease from one effort to the next: {dict(multiples)}")
    return effort_budgets(stats, GREEDY, multiples)


def choose(
    stats: Sequence[ProblemStats], budgets: Mapping[str, float], parent: Mapping[str, str] | None = None,
    z: float = DEFAULT_Z, guessed: Guessed | None = None,
) -> dict[str, Choice]:  # fmt: skip
    """Per effort, the stable choice (:func:`~.route_choice.choose_stable`: from the parent
    group's choice or the previous effort's, moved only by a paired margin on measured problems)
    among the configurations priced on all of ``stats``; ``none`` is the greedy sample."""
    configs = [label for label in covering(stats) if not is_adaptive(label)]
    if GREEDY not in configs:
        raise ValueError("the greedy sample is not priced on every problem: budgets have no base")
    out = choose_stable(stats, configs, budgets, start=GREEDY, parent=parent, z=z, guessed=guessed)
    if "none" in out:
        out["none"] = best(stats, [GREEDY], math.inf)
    return out


def configs_of(choices: Mapping[str, Choice]) -> dict[str, str]:
    """Effort -> configuration label of ``choices`` (a parent for :func:`choose`)."""
    return {effort: c.config for effort, c in choices.items()}


# ------------------------------------------------------------------------------ expectations
def expectation(
    label: str, members: Sequence[ProblemStats], latency: Mapping[tuple[str, str], float], source: str,
    seed: int = 0,
) -> dict[str, Any]:  # fmt: skip
    """The route's ``expected`` (shared contract): accuracy with its 95% bootstrap interval over
    ``members``, mean generated and prompt tokens, median latency."""
    measured = [m.configs[label] for m in members]
    accuracy = [c.accuracy for c in measured]
    low, high = bootstrap_interval(accuracy, seed=seed)
    latencies = [latency[(m.problem_id, label)] for m in members if (m.problem_id, label) in latency]
    return {
        "accuracy": float(np.mean(accuracy)) if accuracy else 0.0,
        "interval": [low, high],
        "problems": len(measured),
        "generated_tokens": float(np.mean([c.generated_tokens for c in measured])) if measured else 0.0,
        "prompt_tokens": float(np.mean([c.prompt_tokens for c in measured])) if measured else 0.0,
        "p50_latency_s": float(np.median(latencies)) if latencies else None,
        "source": source,
    }


# ------------------------------------------------------------------------------ the fit
@dataclass
class _Context:
    pools: Sequence[ProblemPool]
    configs: Mapping[str, Config]  # label -> configuration
    latency: dict[tuple[str, str], float]
    source: str
    seed: int
    live: LiveSet | None = None
    imputed: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # live label -> problem -> group

    def route(self, label: str, members: Sequence[ProblemStats], where: str) -> dict[str, Any]:
        if self.live is not None and label in self.live.routes:
            route = dict(self.live.routes[label])
            guessed = sum(1 for m in members if m.problem_id in self.imputed.get(label, {}))
            where += (f"; {label} measured ({self.live.source_of(label)}) on {len(members) - guessed}, imputed by the "
                      f"difference estimator on {guessed}")  # fmt: skip
        else:
            route = route_of(self.configs[label], self.pools)
        source = f"{self.source}; {where}, {len(members)} problems"
        route["expected"] = expectation(label, members, self.latency, source, self.seed)
        return route


def fit(
    pools: Sequence[ProblemPool], pricer: Pricer, configs: Sequence[Config], *,
    features: np.ndarray | None = None, settings: FitSettings | None = None,
    provenance: Mapping[str, Any] | None = None, source: str = "pools", live: LiveSet | None = None,
) -> Fit:  # fmt: skip
    """Fit the routing table on ``pools``. ``features``: one ``difficulty_features`` row per pool
    (``evaluation.routing.embeddings.feature_rows`` of the questions) for the embedding estimator;
    without them the table has no estimator and one route per effort. ``source`` names the
    pools in every route's ``expected``. ``live``: sequential and tree configurations measured
    live, competing where measured or imputed (:mod:`~.live_join`)."""
    s = settings or FitSettings()
    if not pools:
        raise ValueError("no calibration pools to fit routes on")
    priced = price_all(pricer, pools, configs)
    stats = problem_stats(pools, priced, configs, s.prefill_weight)
    by_label = {label_of(c): c for c in configs if c.family not in NOT_ROUTABLE}
    latency = {(pid, label_of(c)): e.latency_s for c in configs for pid, e in priced.get(c.name, {}).items()}
    task_of = {p.id: task_type_of(p) for p in pools}
    family_of = {p.id: p.family for p in pools}
    imputed = join(stats, live, GREEDY, [family_of, task_of], latency, s.prefill_weight) if live else {}
    ctx = _Context(pools, by_label, latency, source, s.seed, live, imputed)

    estimator, bins, difficulty = _estimator(pools, stats, features, s)
    edges = [(b["name"], b["max"]) for b in bins]
    bin_of = {pid: difficulty_bin(d, edges) for pid, d in difficulty.items()}

    text = [st for st, p in zip(stats, pools, strict=True) if "code" not in p.draws] or list(stats)
    per_family = family_stats(text, family_of)
    default = choose(per_family, budgets_for(per_family, s.multiples), z=s.switch_z,
                     guessed=guessed_families(imputed, text, family_of))  # fmt: skip
    families = len(per_family)
    routes = {
        effort: {ANY_BIN: ctx.route(c.config, text, f"default: best on average across {families} families")}
        for effort, c in default.items()
    }
    task_routes: dict[str, dict[str, dict[str, Any]]] = {}
    chosen: dict[str, dict[str, str]] = {p.id: {} for p in pools}
    for task in sorted(set(task_of.values())):
        members = [st for st in stats if task_of[st.problem_id] == task]
        if len(members) < s.min_task_problems:
            continue
        task_routes[task] = _task_routes(ctx, task, members, edges, bin_of, s, chosen, configs_of(default))
    for st in stats:
        if task_of[st.problem_id] not in task_routes:
            chosen[st.problem_id] = {effort: c.config for effort, c in default.items()}
    _adapt(ctx, configs, routes, task_routes, text, stats, task_of, bin_of, chosen, s)

    table = {
        "version": TABLE_VERSION,
        "description": _description(pools, task_routes, families),
        "provenance": {
            **(provenance or {}),
            **_counts(pools, task_of),
            **({"live": live_provenance(live, imputed)} if live else {}),
        },
        "estimator": estimator,
        "difficulty_bins": bins,
        "routes": routes,
        "task_routes": task_routes,
    }
    predictions = [
        {
            "id": p.id, "family": p.family, "kind": p.kind, "task_type": task_of[p.id],
            "difficulty": difficulty.get(p.id), "bin": bin_of.get(p.id), "pass1": st.pass1,
            "efforts": {effort: {"config": label, **_outcome(st, label)} for effort, label in chosen[p.id].items()},
        }
        for p, st in zip(pools, stats, strict=True)
    ]  # fmt: skip
    return Fit(table, predictions)


def _task_routes(
    ctx: _Context, task: str, members: Sequence[ProblemStats], edges: Sequence[tuple[str, float]],
    bin_of: Mapping[str, str], s: FitSettings, chosen: dict[str, dict[str, str]], parent: Mapping[str, str],
) -> dict[str, dict[str, Any]]:  # fmt: skip
    """A task type's routes per effort: per bin where the bin holds ``min_bin_problems``, the
    task type's all-problem choice elsewhere; one ``*`` route when no bin has routes of its own.
    A binned task type is binned at every effort (``none`` too), so each bin's figures are over
    the same problems from one effort to the next and its ladder can be read down the card."""
    budgets = budgets_for(members, s.multiples)
    guessed = {label: set(ids) for label, ids in ctx.imputed.items()}
    overall = choose(members, budgets, parent, s.switch_z, guessed)
    per_bin: dict[str, tuple[list[ProblemStats], dict[str, Choice]]] = {}
    for name, _ in edges:
        inside = [m for m in members if bin_of.get(m.problem_id) == name]
        if len(inside) >= s.min_bin_problems and len(inside) < len(members):
            per_bin[name] = (inside, choose(inside, budgets, configs_of(overall), s.switch_z, guessed))
    out: dict[str, dict[str, Any]] = {}
    for effort, choice in overall.items():
        labels = {name: per_bin[name][1][effort].config if name in per_bin else choice.config for name, _ in edges}
        if not per_bin:
            out[effort] = {ANY_BIN: ctx.route(choice.config, members, f"{task}, every bin")}
        else:
            out[effort] = {
                name: ctx.route(label, per_bin[name][0], f"{task}, bin {name}") if name in per_bin
                else ctx.route(label, members, f"{task}, every bin (bin {name} has too few problems)")
                for name, label in labels.items()
            }  # fmt: skip
        for m in members:
            b = bin_of.get(m.problem_id)
            chosen[m.problem_id][effort] = labels.get(b or "", choice.config)
    return out


def _adapt(
    ctx: _Context, configs: Sequence[Config], routes: dict[str, dict[str, Any]],
    task_routes: dict[str, dict[str, dict[str, Any]]], text: Sequence[ProblemStats], stats: Sequence[ProblemStats],
    task_of: Mapping[str, str], bin_of: Mapping[str, str], chosen: dict[str, dict[str, str]], s: FitSettings,
) -> None:  # fmt: skip
    """From ``medium`` up, the adaptive vote replaces the fixed routes wherever it is priced and no
    cascade won (:mod:`~.adaptive_fit`): the default routes from every text problem, each task
    type's from its own, binned as its fixed routes are (each bin's ``expected`` over its own
    problems)."""
    fitted = adaptive_routes(text, configs, {ANY_BIN: text}, ctx.route, "default: every text problem")
    if fitted is not None:
        adopted = _without_cascades(routes, fitted[0])
        routes.update(adopted)
        for st in stats:
            if task_of[st.problem_id] not in task_routes:
                chosen[st.problem_id] |= {e: c.name for e, c in fitted[1].efforts.items() if e in adopted}
    for task, per_effort in task_routes.items():
        members = [st for st in stats if task_of[st.problem_id] == task]
        keys = list(next(iter(per_effort.values())))
        groups = {ANY_BIN: members} if keys == [ANY_BIN] else {
            key: [m for m in members if bin_of.get(m.problem_id) == key] for key in keys}  # fmt: skip
        groups = {k: v if len(v) >= s.min_bin_problems else members for k, v in groups.items()}
        adapted = adaptive_routes(members, configs, groups, ctx.route, task)
        if adapted is None:
            continue
        adopted = _without_cascades(per_effort, adapted[0])
        per_effort.update(adopted)
        for m in members:
            chosen[m.problem_id] |= {e: c.name for e, c in adapted[1].efforts.items() if e in adopted}


def _without_cascades(
    fixed: Mapping[str, Mapping[str, Mapping[str, Any]]], adaptive: Mapping[str, dict[str, dict[str, Any]]]
) -> dict[str, dict[str, dict[str, Any]]]:
    """The adaptive routes to adopt, per effort: where no fixed route escalates, or where the
    fitted adaptive order escalates itself (the replay priced the larger model's draws) and is
    expected at least as accurate as every cascade it would replace; else the cascade that won
    the fit stays."""
    return {effort: routes for effort, routes in adaptive.items() if _beats_cascades(fixed.get(effort, {}), routes)}


def _beats_cascades(fixed: Mapping[str, Mapping[str, Any]], adaptive: Mapping[str, Mapping[str, Any]]) -> bool:
    cascades = {key: r for key, r in fixed.items() if r.get("strategy") == "cascade"}
    if not cascades:
        return True
    if not _escalates(adaptive):
        return False
    return all(key in adaptive and _accuracy(adaptive[key]) >= _accuracy(r) for key, r in cascades.items())


def _accuracy(route: Mapping[str, Any]) -> float:
    return float((route.get("expected") or {}).get("accuracy", 0.0))


def _escalates(routes: Mapping[str, Mapping[str, Any]]) -> bool:
    steps = (str((r.get("params") or {}).get("steps", "")) for r in routes.values())
    return any("escalate" in s.split(",") for s in steps)


def _outcome(st: ProblemStats, label: str) -> dict[str, float]:
    c = st.configs.get(label)
    if c is None:
        return {}
    return {"accuracy": c.accuracy, "generated_tokens": c.generated_tokens, "prompt_tokens": c.prompt_tokens}


def _estimator(
    pools: Sequence[ProblemPool], stats: Sequence[ProblemStats], features: np.ndarray | None, s: FitSettings
) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, float]]:
    """The estimator spec, the bins and each problem's estimated difficulty. Without features
    (or with too few problems to bin) there is no estimator: one bin, one route per effort."""
    if features is None or len(pools) < 2 * len(s.bins):
        return {"kind": "none"}, [{"name": "all", "max": 1.0}], {}
    if features.shape[0] != len(pools):
        raise ValueError(f"{features.shape[0]} feature rows for {len(pools)} pools")
    targets = np.array([1.0 - st.pass1 for st in stats])
    ridge = fit_ridge(features, targets, alpha=s.ridge_alpha)
    predicted = ridge.predict(features)
    edges = quantile_edges(predicted, s.bins)
    edges = strictly_rising(edges)
    spec = {"kind": "embedding", "features": FEATURE_SET, "ridge": ridge.to_json()}
    bins = [{"name": name, "max": upper} for name, upper in edges]
    return spec, bins, {p.id: float(d) for p, d in zip(pools, predicted, strict=True)}


def _counts(pools: Sequence[ProblemPool], task_of: Mapping[str, str]) -> dict[str, Any]:
    code = [p.draws["code"] for p in pools if "code" in p.draws]
    return {
        "problems": len(pools),
        # code_execution competes on code prompts only where every pool recorded its behaviour
        **({"code_behaviour": f"{sum(d.tests is not None for d in code)} of {len(code)} code pools"} if code else {}),
        "families": dict(sorted(Counter(p.family for p in pools).items())),
        "kinds": dict(sorted(Counter(p.kind for p in pools).items())),
        "task_types": dict(sorted(Counter(task_of.values()).items())),
        "splits": dict(sorted(Counter(p.split for p in pools).items())),
    }


def _description(pools: Sequence[ProblemPool], task_routes: Mapping[str, Any], families: int) -> str:
    return (
        f"Fitted from {len(pools)} calibration pools (sample once, price many): per task type "
        f"({', '.join(task_routes) or 'none'}), effort and difficulty bin, the priced configuration with the best "
        f"accuracy within the effort's budget ({', '.join(f'{e}={m:g}x' for e, m in BUDGET_MULTIPLES.items())} one "
        f"greedy sample); none is one greedy sample; other task types get the best on average across {families} "
        "families."
    )

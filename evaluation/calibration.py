"""Calibrate routing from measurements: a difficulty estimator and the routing table.

Compute-optimal allocation (PRIMER §4): estimate difficulty first, then per effort and
difficulty bin spend on the strategy that buys the most accuracy within the effort's budget.
Everything here is pure (numpy over per-problem statistics); embedding and file I/O live in
the callers. The held-out evaluation compares adaptive routing with every fixed configuration
on the same held-out problems and the same measured outcomes, charging adaptive routing its
difficulty probe (nothing for the zero-token embedding estimator). Routes may differ per task
type (``services/common/task_type.py``), and any measured configuration may serve any type.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evaluation.records import RequestRecord
from services.common.task_type import TaskType

# Default effort budgets, in multiples of one single-sample request's mean tokens.
BUDGET_MULTIPLES = {"none": 1.0, "minimal": 1.0, "low": 2.0, "medium": 4.0, "high": 8.0, "xhigh": 16.0}
# What one prompt (prefill) token costs in generated (decode) tokens: the ratio of the default
# prices in EvaluationSettings (0.05 vs 0.20 USD per million). Configuration costs are priced
# in generated-token equivalents, so a verifier that prefills long judge prompts is not
# charged as if it had decoded them.
PREFILL_WEIGHT = 0.25


@dataclass
class ConfigStats:
    """One pinned configuration's measured outcome on one problem (means over its requests)."""

    accuracy: float
    tokens: float  # cost per request in generated-token equivalents: generated + prefill_weight * prompt
    requests: int
    prompt_tokens: float = 0.0  # mean prefill tokens per request (policy, judges, probe)
    generated_tokens: float = 0.0  # mean decoded tokens per request


@dataclass
class ProblemStats:
    problem_id: str
    question: str
    level: int
    configs: dict[str, ConfigStats] = field(default_factory=dict)
    pass1: float = 0.0  # mean correctness of all single candidates seen for this problem
    probe_difficulty: float | None = None  # the gateway's probe estimate, or agreement of samples


def agreement_difficulty(answers: Sequence[str | None]) -> float:
    """1 - share of the largest cluster of equal answers (no answer never agrees) - the same
    rule as the gateway's probe, so offline and online estimates share one scale."""
    keyed = [a for a in answers if a]
    if not answers or not keyed:
        return 1.0
    largest = Counter(keyed).most_common(1)[0][1]
    if largest == 1 and len(answers) > 1:
        return 1.0
    return 1.0 - largest / len(answers)


def problem_stats(
    records: Sequence[RequestRecord], questions: Mapping[str, str], probe_samples: int = 3,
    prefill_weight: float = PREFILL_WEIGHT,
) -> dict[str, ProblemStats]:  # fmt: skip
    """Per problem: every pinned configuration's accuracy and tokens, pass@1 and a probe value.

    A configuration's ``tokens`` prices prefill and decode apart: generated tokens plus
    ``prefill_weight`` times prompt tokens (1.0 weighs them alike).

    The probe value is the gateway's reported difficulty when a routed request measured one;
    otherwise the agreement of the problem's first ``probe_samples`` candidates/samples.
    Error records are left out: an infrastructure failure says nothing about difficulty.
    """
    by_problem: dict[str, list[RequestRecord]] = defaultdict(list)
    for r in records:
        if r.outcome != "error":
            by_problem[r.problem_id].append(r)
    out: dict[str, ProblemStats] = {}
    for pid, recs in sorted(by_problem.items()):
        stats = ProblemStats(pid, questions.get(pid, ""), recs[0].level)
        per_config: dict[str, list[RequestRecord]] = defaultdict(list)
        for r in recs:
            if r.strategy_pinned:
                per_config[r.strategy_pinned].append(r)
        for label, group in per_config.items():
            prompt = float(np.mean([r.prompt_tokens for r in group]))
            generated = float(np.mean([r.completion_tokens for r in group]))
            stats.configs[label] = ConfigStats(
                accuracy=float(np.mean([bool(r.correct) for r in group])),
                tokens=generated + prefill_weight * prompt,
                requests=len(group),
                prompt_tokens=prompt,
                generated_tokens=generated,
            )
        singles: list[tuple[str | None, bool]] = []
        for r in recs:
            singles.extend(r.candidates if r.candidates else [(r.answer, bool(r.correct))])
        stats.pass1 = float(np.mean([c for _, c in singles])) if singles else 0.0
        gateway = [r.difficulty for r in recs if r.difficulty is not None]
        if gateway:
            stats.probe_difficulty = float(np.mean(gateway))
        elif singles:
            stats.probe_difficulty = agreement_difficulty([a for a, _ in singles[:probe_samples]])
        out[pid] = stats
    return out


# --- the difficulty estimator -------------------------------------------------------------------


@dataclass
class RidgeEstimator:
    """Predicted difficulty (1 - pass@1) = clip(x·w + b, 0, 1) on standardized features."""

    weights: np.ndarray
    bias: float
    mean: np.ndarray
    scale: np.ndarray
    alpha: float

    def predict(self, features: np.ndarray) -> np.ndarray:
        z = (features - self.mean) / self.scale
        return np.asarray(np.clip(z @ self.weights + self.bias, 0.0, 1.0))

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "ridge",
            "alpha": self.alpha,
            "bias": self.bias,
            "weights": self.weights.tolist(),
            "mean": self.mean.tolist(),
            "scale": self.scale.tolist(),
        }


def fit_ridge(features: np.ndarray, targets: np.ndarray, alpha: float = 10.0) -> RidgeEstimator:
    """Closed-form ridge regression (the bias is not penalized)."""
    if features.ndim != 2 or len(features) != len(targets) or len(targets) < 2:
        raise ValueError("need a 2-D feature matrix with one row per target and at least two rows")
    mean = features.mean(axis=0)
    scale = features.std(axis=0)
    scale[scale < 1e-9] = 1.0
    z = (features - mean) / scale
    bias = float(targets.mean())
    gram = z.T @ z + alpha * np.eye(z.shape[1])
    weights = np.linalg.solve(gram, z.T @ (targets - bias))
    return RidgeEstimator(weights, bias, mean, scale, alpha)


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Rank correlation (average ranks for ties); 0 when either side is constant."""

    def ranks(x: np.ndarray) -> np.ndarray:
        order = np.argsort(x, kind="stable")
        r = np.empty(len(x))
        r[order] = np.arange(len(x), dtype=float)
        for value in np.unique(x):
            mask = x == value
            r[mask] = r[mask].mean()
        return r

    ra, rb = ranks(np.asarray(a, float)), ranks(np.asarray(b, float))
    if ra.std() < 1e-12 or rb.std() < 1e-12:
        return 0.0
    return float(np.corrcoef(ra, rb)[0, 1])


# --- routes ---------------------------------------------------------------------------------------


def bin_of(difficulty: float, edges: Sequence[tuple[str, float]]) -> str:
    for name, upper in edges:
        if difficulty <= upper:
            return name
    return edges[-1][0]


def quantile_edges(predictions: np.ndarray, names: Sequence[str]) -> list[tuple[str, float]]:
    """Bin edges at the calibration quantiles of an estimator's predictions, so each bin holds an
    equal share of the calibration problems; the last edge is 1.0 (the routing table's rule)."""
    inner = np.quantile(predictions, np.linspace(0, 1, len(names) + 1)[1:-1]).tolist() if len(predictions) else []
    if len(inner) < len(names) - 1:
        inner = [(i + 1) / len(names) for i in range(len(names) - 1)]
    return [(name, float(q)) for name, q in zip(names, [*inner, 1.0], strict=True)]


def effort_budgets(
    stats: Sequence[ProblemStats], single_label: str, multiples: Mapping[str, float]
) -> dict[str, float]:
    """Budgets in mean tokens per request: multiples of the measured single-sample cost."""
    costs = [s.configs[single_label].tokens for s in stats if single_label in s.configs]
    if not costs:
        raise ValueError(f"no measurements of the single-sample configuration {single_label!r} to scale budgets")
    base = float(np.mean(costs))
    return {effort: base * m for effort, m in multiples.items()}


@dataclass(frozen=True)
class Choice:
    config: str
    accuracy: float
    tokens: float
    problems: int


def choose_routes(
    stats: Sequence[ProblemStats], bins: Mapping[str, str], edges: Sequence[tuple[str, float]],
    budgets: Mapping[str, float], min_problems: int = 3,
) -> dict[str, dict[str, Choice]]:  # fmt: skip
    """For each effort and bin: the configuration with the best mean accuracy on the bin's
    calibration problems among those whose mean tokens fit the effort's budget (ties → fewer
    tokens). A bin with fewer than ``min_problems`` problems borrows the all-problem choice.
    Every measured configuration competes, whatever the task type (it is a default, not a gate)."""
    configs = sorted({c for s in stats for c in s.configs})
    if not configs:
        raise ValueError("no configuration was measured")
    routes: dict[str, dict[str, Choice]] = {}
    for effort, budget in budgets.items():
        routes[effort] = {}
        overall = _best(stats, configs, budget)
        for name, _ in edges:
            members = [s for s in stats if bins.get(s.problem_id) == name]
            choice = _best(members, configs, budget) if len(members) >= min_problems else None
            routes[effort][name] = choice or overall
    return routes


def choose_task_routes(
    stats: Sequence[ProblemStats], task_of: Mapping[str, TaskType], bins: Mapping[str, str],
    edges: Sequence[tuple[str, float]], budgets: Mapping[str, float], min_problems: int = 6,
) -> dict[TaskType, dict[str, dict[str, Choice]]]:  # fmt: skip
    """Routes of their own for every task type with at least ``min_problems`` calibration
    problems (chosen among that task type's problems only); the others use the default routes."""
    out: dict[TaskType, dict[str, dict[str, Choice]]] = {}
    for task in sorted(set(task_of.values())):
        members = [s for s in stats if task_of.get(s.problem_id) == task]
        if len(members) >= min_problems:
            out[task] = choose_routes(members, bins, edges, budgets)
    return out


def _best(stats: Sequence[ProblemStats], configs: Sequence[str], budget: float) -> Choice:
    best: Choice | None = None
    cheapest: Choice | None = None
    for config in configs:
        measured = [s.configs[config] for s in stats if config in s.configs]
        if not measured:
            continue
        choice = Choice(
            config, float(np.mean([m.accuracy for m in measured])), float(np.mean([m.tokens for m in measured])),
            len(measured),
        )  # fmt: skip
        if cheapest is None or choice.tokens < cheapest.tokens:
            cheapest = choice
        if choice.tokens > budget:
            continue
        if best is None or (choice.accuracy, -choice.tokens) > (best.accuracy, -best.tokens):
            best = choice
    if cheapest is None:
        raise ValueError("no configuration was measured on these problems")
    return best or cheapest  # nothing fits: the cheapest is the honest fallback


def pin_effort(routes: dict[str, dict[str, Choice]], effort: str, stats: Sequence[ProblemStats], config: str) -> None:
    """Route every bin of ``effort`` to ``config``, whatever the budget search preferred: the
    ladder's ``none`` rung is one greedy sample of the bare model, the cheapest honest answer
    (PRIMER §8), even where a tool-using configuration would be cheaper."""
    if effort in routes:
        choice = _best(stats, [config], float("inf"))
        routes[effort] = {name: choice for name in routes[effort]}


def single_sample_label(stats: Sequence[ProblemStats], preferred: str = "single") -> str:
    """The measured single-sample configuration: ``preferred`` if measured, else the first
    ``single…`` label (``single:greedy=true``)."""
    labels = sorted({c for s in stats for c in s.configs})
    if preferred in labels:
        return preferred
    singles = [label for label in labels if label.partition(":")[0] == "single"]
    if not singles:
        raise ValueError(f"no single-sample configuration among the measured ones: {labels}")
    return singles[0]


# --- held-out evaluation ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PolicyResult:
    name: str
    accuracy: float
    tokens: float  # mean per problem, probe included for adaptive policies
    problems: int


def evaluate_fixed(stats: Sequence[ProblemStats]) -> list[PolicyResult]:
    """Every fixed configuration on the held-out problems where it was measured."""
    out = []
    for config in sorted({c for s in stats for c in s.configs}):
        measured = [s.configs[config] for s in stats if config in s.configs]
        out.append(
            PolicyResult(
                config, float(np.mean([m.accuracy for m in measured])), float(np.mean([m.tokens for m in measured])),
                len(measured),
            )
        )  # fmt: skip
    return out


def evaluate_adaptive(
    name: str, stats: Sequence[ProblemStats], bins: Mapping[str, str], routes: Mapping[str, Choice],
    probe_tokens: float, task_routes: Mapping[TaskType, Mapping[str, Choice]] | None = None,
    task_of: Mapping[str, TaskType] | None = None,
) -> PolicyResult:  # fmt: skip
    """Route every held-out problem by its estimated bin (and task type, where ``task_routes``
    has routes for it) and score the measured outcome of the chosen configuration on that very
    problem; the probe's tokens are charged to every problem."""
    acc, tok = [], []
    for s in stats:
        task = (task_of or {}).get(s.problem_id)
        by_bin = (task_routes or {}).get(task, routes) if task is not None else routes
        choice = by_bin[bins[s.problem_id]]
        measured = s.configs.get(choice.config)
        if measured is None:
            continue
        acc.append(measured.accuracy)
        tok.append(measured.tokens + probe_tokens)
    return PolicyResult(name, float(np.mean(acc)) if acc else 0.0, float(np.mean(tok)) if tok else 0.0, len(acc))


def verdict(adaptive: PolicyResult, reference: PolicyResult) -> str:
    """The issue's target in words: reference accuracy with at most half of its tokens."""
    ratio = adaptive.tokens / reference.tokens if reference.tokens else float("inf")
    gap = adaptive.accuracy - reference.accuracy
    met = gap >= -1e-9 and ratio <= 0.5
    return (
        f"{'MET' if met else 'NOT MET'}: {adaptive.name} reaches {100 * adaptive.accuracy:.1f}% vs "
        f"{100 * reference.accuracy:.1f}% for the best fixed high-effort configuration {reference.name!r} "
        f"({gap * 100:+.1f} points) using {100 * ratio:.0f}% of its tokens "
        f"({adaptive.tokens:.0f} vs {reference.tokens:.0f} per problem, probe included)."
    )

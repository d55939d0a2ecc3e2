"""A learned router over the calibration pools, measured, not served.

Per configuration, a model predicts from the prompt's zero-token features (the gateway's
``difficulty_features``: MiniLM embedding, text counts, task-type one-hot) the probability
that the configuration answers the prompt right; per effort the router picks, for each prompt,
the configuration with the best predicted accuracy among those whose mean cost on the training
problems of the prompt's task type fits the effort's budget (budgets as :mod:`~.route_fit`
sets them: multiples of one greedy sample's mean cost; ``none`` is one greedy sample).
The only hard rule is applicability: a configuration the prompt's kind cannot run (code
execution on a text question) is never picked.

It is compared with :mod:`~.route_fit`'s table routing (per task type x difficulty bin) and
with every fixed configuration by K-fold cross-validation grouped by problem (written before
development pools existed; :mod:`evaluation.heldout.learned_heldout` measures on them): every
figure is on problems the fold's fit never saw, but from the same families. Each figure carries
a 95% bootstrap interval over problems; learned minus table is a paired bootstrap. The router is
not wired into the gateway.
Pure numpy: the problems come priced and embedded (:mod:`~.router_problems`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from evaluation.routing.difficulty import difficulty_bin, fit_ridge, quantile_edges, strictly_rising
from evaluation.routing.route_fit import (
    BIN_NAMES,
    GREEDY,
    budgets_for,
    choose,
    configs_of,
    covering,
    family_stats,
)
from evaluation.routing.router_problems import RouterProblem
from evaluation.routing.types import BUDGET_MULTIPLES
from evaluation.stats.intervals import bootstrap_interval
from services.common.embedding import DIM as EMBEDDING_DIM

Predictor = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


# ------------------------------------------------------------------------------ predictors
def ridge_predictor(alpha: float = 10.0) -> Predictor:
    """Ridge on standardized features, clipped to [0, 1] (calibration's ridge)."""

    def predict(train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray) -> np.ndarray:
        if len(train_y) < 2:
            return np.full(len(test_x), float(train_y.mean()) if len(train_y) else 0.0)
        return fit_ridge(train_x, train_y, alpha=alpha).predict(test_x)

    return predict


def knn_predictor(k: int = 5, dims: int = EMBEDDING_DIM) -> Predictor:
    """Mean target of the ``k`` nearest training prompts by cosine over the first ``dims``
    features (the unit-norm embedding)."""

    def predict(train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray) -> np.ndarray:
        if not len(train_y):
            return np.zeros(len(test_x))
        a, b = train_x[:, :dims], test_x[:, :dims]
        a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
        b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
        nearest = np.argsort(-(b @ a.T), axis=1, kind="stable")[:, : min(k, len(train_y))]
        return np.asarray(train_y[nearest].mean(axis=1))

    return predict


# ------------------------------------------------------------------------------ folds
def grouped_folds(groups: Sequence[str], k: int, seed: int = 0) -> list[np.ndarray]:
    """Test indices of ``k`` folds; every member of a group lands in one fold."""
    names = sorted(set(groups))
    order = np.random.default_rng(seed).permutation(len(names))
    fold_of = {names[j]: i % k for i, j in enumerate(order)}
    folds = [np.array([i for i, g in enumerate(groups) if fold_of[g] == f], dtype=int) for f in range(k)]
    return [f for f in folds if len(f)]


# ------------------------------------------------------------------------------ routers
def scope_of(train: Sequence[RouterProblem], task: str) -> list[RouterProblem]:
    """The training problems a prompt's budgets and costs are read from: its task type's,
    else (a task type calibration never saw) the text-answered ones."""
    same = [p for p in train if p.task == task]
    return same or [p for p in train if p.text] or list(train)


def route_learned(
    train: Sequence[RouterProblem], test: Sequence[RouterProblem], predictor: Predictor,
    multiples: Mapping[str, float] = BUDGET_MULTIPLES, shrink: float = 0.0,
) -> list[dict[str, str]]:  # fmt: skip
    """Per test problem and effort, the configuration with the best predicted accuracy among
    those applicable to it whose mean cost in its scope fits the effort's budget. ``shrink``
    in [0, 1] pulls each prediction towards the configuration's mean accuracy in the prompt's
    scope (its task type): a few neighbours' noise then moves a pick only where it is large."""
    labels = sorted({c for p in train for c in p.stats.configs})
    predicted: dict[str, np.ndarray] = {}
    test_x = np.vstack([p.features for p in test])
    for label in labels:
        rows = [p for p in train if label in p.stats.configs]
        x = np.vstack([p.features for p in rows])
        y = np.array([p.stats.configs[label].accuracy for p in rows])
        predicted[label] = predictor(x, y, test_x)
    out = []
    for i, p in enumerate(test):
        scope = scope_of(train, p.task)
        stats = [s.stats for s in scope]
        budgets = budgets_for(stats, multiples)
        cost = {c: float(np.mean([s.configs[c].tokens for s in stats])) for c in covering(stats)}
        score = {c: (1 - shrink) * predicted[c][i] + shrink * float(np.mean([s.configs[c].accuracy for s in stats]))
                 for c in cost}  # fmt: skip
        chosen: dict[str, str] = {}
        for effort, budget in budgets.items():
            fits = [c for c in cost if cost[c] <= budget * (1 + 1e-9) and c in p.stats.configs]
            if effort == "none" or not fits:
                chosen[effort] = GREEDY
                continue
            chosen[effort] = max(fits, key=lambda c: (score[c], -cost[c]))
        out.append(chosen)
    return out


def nearest(
    train: Sequence[RouterProblem], query: np.ndarray, k: int, dims: int = EMBEDDING_DIM
) -> list[RouterProblem]:
    """The ``k`` training problems whose embeddings are nearest ``query``'s by cosine."""
    a = np.vstack([p.features[:dims] for p in train])
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = query[:dims] / max(float(np.linalg.norm(query[:dims])), 1e-12)
    order = np.argsort(-(a @ b), kind="stable")[: min(k, len(train))]
    return [train[int(j)] for j in order]


def route_neighbourhood(
    train: Sequence[RouterProblem], test: Sequence[RouterProblem], k: int = 5,
    multiples: Mapping[str, float] = BUDGET_MULTIPLES, dims: int = EMBEDDING_DIM,
) -> list[dict[str, str]]:  # fmt: skip
    """kNN with the table's stability rule: per test prompt, its ``k`` nearest training prompts
    of its scope form a group whose parent is the scope's own choice (:func:`~.route_fit.choose`
    on the whole task type), so a prompt leaves its task type's route only where its neighbours
    beat it by a paired margin, and its ladder never steps down on them."""
    parents: dict[str, dict[str, str]] = {}
    out = []
    for p in test:
        scope = scope_of(train, p.task)
        stats = [s.stats for s in scope]
        budgets = budgets_for(stats, multiples)
        if p.task not in parents:
            parents[p.task] = configs_of(choose(stats, budgets))
        near = [s.stats for s in nearest(scope, p.features, k, dims)]
        chosen = configs_of(choose(near, budgets, parents[p.task]))
        out.append({e: c if c in p.stats.configs else GREEDY for e, c in chosen.items()})
    return out


def route_table(
    train: Sequence[RouterProblem], test: Sequence[RouterProblem], multiples: Mapping[str, float] = BUDGET_MULTIPLES,
    min_bin_problems: int = 3, alpha: float = 10.0,
) -> list[dict[str, str]]:  # fmt: skip
    """route_fit's rule on the training problems, applied to the test ones: per task type and
    difficulty bin (a ridge on 1 - pass@1, bins at training quantiles) where the bin holds
    ``min_bin_problems``, the task type's choice elsewhere; unseen task types get the best on
    average across the text families."""
    x = np.vstack([p.features for p in train])
    ridge = fit_ridge(x, np.array([1.0 - p.stats.pass1 for p in train]), alpha=alpha)
    edges = strictly_rising(quantile_edges(ridge.predict(x), BIN_NAMES))
    bin_of = {p.stats.problem_id: difficulty_bin(float(d), edges) for p, d in zip(train, ridge.predict(x), strict=True)}
    test_bins = [difficulty_bin(float(d), edges) for d in ridge.predict(np.vstack([p.features for p in test]))]
    text = [p for p in train if p.text] or list(train)
    per_family = family_stats([p.stats for p in text], {p.stats.problem_id: p.family for p in text})
    default = configs_of(choose(per_family, budgets_for(per_family, multiples)))
    tables: dict[str, dict[str, dict[str, str]]] = {}
    for task in sorted({p.task for p in train}):
        members = [p.stats for p in train if p.task == task]
        budgets = budgets_for(members, multiples)
        overall = configs_of(choose(members, budgets, default))
        per_bin = {name: dict(overall) for name, _ in edges}
        for name, _ in edges:
            inside = [m for m in members if bin_of[m.problem_id] == name]
            if min_bin_problems <= len(inside) < len(members):
                per_bin[name] = configs_of(choose(inside, budgets, overall))
        tables[task] = per_bin
    out = []
    for p, b in zip(test, test_bins, strict=True):
        chosen = tables[p.task][b] if p.task in tables else default
        out.append({e: c if c in p.stats.configs else GREEDY for e, c in chosen.items()})
    return out


# ------------------------------------------------------------------------------ evaluation
def _summary(acc: Sequence[float], cost: Sequence[float], seed: int) -> dict[str, Any]:
    low, high = bootstrap_interval(list(acc), seed=seed)
    return {"accuracy": float(np.mean(acc)) if acc else 0.0, "interval": [low, high], "problems": len(acc),
            "mean_cost": float(np.mean(cost)) if cost else 0.0}  # fmt: skip


def paired_difference(a: Sequence[float], b: Sequence[float], seed: int = 0, resamples: int = 2000) -> dict[str, Any]:
    """Mean of a - b with a 95% paired bootstrap interval over problems."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if not len(d):
        return {"mean": 0.0, "interval": [0.0, 0.0]}
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), size=(resamples, len(d)))].mean(axis=1)
    return {"mean": float(d.mean()), "interval": [float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))]}


def cross_validate(
    problems: Sequence[RouterProblem], predictors: Mapping[str, Predictor], *, folds: int = 5, seed: int = 0,
    multiples: Mapping[str, float] = BUDGET_MULTIPLES,
) -> dict[str, Any]:  # fmt: skip
    """Every router's per-problem choices on the fold that held the problem out, the summaries
    per router and effort, learned-minus-table differences, and every fixed configuration."""
    routed: dict[str, list[dict[str, str] | None]] = {m: [None] * len(problems) for m in ["table", *predictors]}
    fold_of = [0] * len(problems)
    for f, test_idx in enumerate(grouped_folds([p.stats.problem_id for p in problems], folds, seed)):
        held = set(test_idx.tolist())
        train = [p for i, p in enumerate(problems) if i not in held]
        test = [problems[i] for i in test_idx]
        choices = {"table": route_table(train, test, multiples)}
        choices |= {name: route_learned(train, test, pred, multiples) for name, pred in predictors.items()}
        for name, per_test in choices.items():
            for i, c in zip(test_idx, per_test, strict=True):
                routed[name][int(i)] = c
                fold_of[int(i)] = f
    efforts = list(multiples)
    outcome: dict[str, dict[str, tuple[list[float], list[float]]]] = {}
    for name, rows in routed.items():
        outcome[name] = {}
        for e in efforts:
            picked = [p.stats.configs[r[e]] for p, r in zip(problems, rows, strict=True) if r is not None]
            outcome[name][e] = ([c.accuracy for c in picked], [c.tokens for c in picked])
    routers = {n: {e: _summary(*outcome[n][e], seed) for e in efforts} for n in routed}
    versus = {n: {e: paired_difference(outcome[n][e][0], outcome["table"][e][0], seed) for e in efforts}
              for n in predictors}  # fmt: skip
    labels = sorted({c for p in problems for c in p.stats.configs})
    fixed = {}
    for label in labels:
        on = [p.stats.configs[label] for p in problems if label in p.stats.configs]
        fixed[label] = _summary([c.accuracy for c in on], [c.tokens for c in on], seed)
    predictions = [
        {"id": p.stats.problem_id, "family": p.family, "task_type": p.task, "fold": fold_of[i],
         "routes": {n: {e: {"config": rows[i][e], "accuracy": p.stats.configs[rows[i][e]].accuracy,  # type: ignore[index]
                            "cost": p.stats.configs[rows[i][e]].tokens} for e in efforts}  # type: ignore[index]
                    for n, rows in routed.items()}}
        for i, p in enumerate(problems)
    ]  # fmt: skip
    return {"routers": routers, "learned_minus_table": versus, "fixed": fixed, "predictions": predictions}

"""Program or chain of thought: a zero-token classifier of a prompt's better modality, judged on
families it never saw.

The gateway's task-type rules (``services/common/task_type.py``) send a prompt they recognize as
computable to program-of-thought routes and everything else (``open``) to chains of thought. This
stage learns from the calibration pools which modality answers a prompt better, from the prompt's
MiniLM embedding alone (the one the gateway computes for its difficulty estimate, so deciding
costs no tokens), so that the gateway can replace the ``open`` default where the classifier knows
better (``services/gateway/modality.py``).

Per problem drawn both ways (a ``cot`` and a ``program`` draw), the accuracy of each modality is
the pool's mean correctness of its candidates (``mean``: the expected accuracy of one sample) or
its greedy candidate's (``greedy``); the label is the better modality, or a tie. The classifier is
an L2-regularised logistic regression on the standardized embedding, each problem weighted by how
much the better modality beats the other (a tie weighs nothing), so it learns where the choice
matters. It is judged leave one family out: fitted without a family, it predicts that family's
problems, and per family the modality it chooses is compared, problem by problem, with the rule's
(``thought`` for ``open``, ``program`` for every other task type) and with the base rate (the
modality that is better on average over the families it was fitted on). The base rate matters:
where the pools hold no prose prompts, a classifier that only restates that programs usually win
would send every ``open`` prompt, prose included, to a program. It is therefore switched on only
where, over the left-out families, its switch beats the rule on the ``open`` prompts (a paired 95%
interval above zero) and its choices beat the base rate. Pure numpy over the embeddings of the
function it is given (``evaluation.routing.embeddings.embed``: the gateway's encoder).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from evaluation.pools.store import Draw, ProblemPool, prompt_text, task_type_of
from evaluation.routing.learned_router import paired_difference

Modality = Literal["program", "thought"]
Measure = Literal["mean", "greedy"]
OPEN = "open"  # the task type whose default the classifier may replace
L2 = 10.0
# A small penalty on the bias keeps it finite when one modality wins every weighted training problem.
BIAS_L2 = 1e-2
THRESHOLDS: tuple[float, ...] = tuple(round(0.5 + 0.01 * i, 2) for i in range(50))  # 0.50 .. 0.99


@dataclass(frozen=True)
class ModalityProblem:
    """One problem drawn both ways: its family, the rule's task type, the accuracy of a program
    and of a chain of thought on it, and its prompt's embedding."""

    id: str
    family: str
    task: str
    program: float
    thought: float
    embedding: np.ndarray

    @property
    def gain(self) -> float:
        """How much a program beats a chain of thought here (negative where it loses)."""
        return self.program - self.thought

    @property
    def label(self) -> Modality | Literal["tie"]:
        return "program" if self.gain > 0 else "thought" if self.gain < 0 else "tie"

    def accuracy(self, modality: Modality) -> float:
        return self.program if modality == "program" else self.thought


def draw_accuracy(draw: Draw, measure: Measure) -> float:
    """A draw's accuracy: its greedy candidate's verdict, or the mean over its judged candidates
    (a candidate whose check failed for an infrastructure reason is left out)."""
    if measure == "greedy":
        greedy = draw.greedy
        return float(bool(greedy is not None and greedy.correct))
    judged = [bool(c.correct) for c in draw.candidates if c.correct is not None]
    return float(np.mean(judged)) if judged else 0.0


def modality_problems(
    pools: Sequence[ProblemPool], embed: Callable[[Sequence[str]], np.ndarray], measure: Measure = "mean"
) -> list[ModalityProblem]:
    """The pools drawn both ways, with their prompts embedded by ``embed`` (one row per text:
    ``evaluation.routing.embeddings.embed``, the gateway's encoder, outside tests)."""
    both = [p for p in pools if "cot" in p.draws and "program" in p.draws]
    vectors = embed([prompt_text(p) for p in both]) if both else np.zeros((0, 0))
    return [
        ModalityProblem(p.id, p.family, task_type_of(p), draw_accuracy(p.draws["program"], measure),
                        draw_accuracy(p.draws["cot"], measure), np.asarray(v, dtype=float))
        for p, v in zip(both, vectors, strict=True)
    ]  # fmt: skip


# ------------------------------------------------------------------------------ the classifier
@dataclass(frozen=True)
class Logistic:
    """P(a program answers better) = sigmoid(x · weights + bias) on the raw embedding (the
    standardization of the fit folded in, so the gateway applies it as it is)."""

    weights: np.ndarray
    bias: float

    def probability(self, x: np.ndarray) -> np.ndarray:
        z = np.asarray(x, dtype=float) @ self.weights + self.bias
        return np.asarray(0.5 * (1.0 + np.tanh(0.5 * z)))  # the sigmoid, without overflow


def fit_logistic(x: np.ndarray, y: np.ndarray, weight: np.ndarray, l2: float = L2, iterations: int = 100) -> Logistic:
    """Weighted L2-regularised logistic regression on standardized features by Newton's method.
    ``y`` is 1 where a program is better; a row of weight 0 does not count. With no weight at all
    the classifier has nothing to say: probability 0.5 everywhere."""
    if x.ndim != 2 or len(x) != len(y) or len(y) != len(weight):
        raise ValueError("need a 2-D feature matrix with one label and one weight per row")
    if not len(y) or float(weight.sum()) <= 0:
        return Logistic(np.zeros(x.shape[1]), 0.0)
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    a = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    penalty = np.diag([*([l2] * x.shape[1]), BIAS_L2])
    beta = np.zeros(a.shape[1])
    for _ in range(iterations):
        p = 0.5 * (1.0 + np.tanh(0.5 * (a @ beta)))
        gradient = a.T @ (weight * (p - y)) + penalty @ beta
        hessian = (a * (weight * p * (1 - p))[:, None]).T @ a + penalty
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if float(np.abs(step).max()) < 1e-9:
            break
    weights = beta[:-1] / scale
    return Logistic(weights, float(beta[-1] - mean @ weights))


def fit_problems(problems: Sequence[ModalityProblem], l2: float = L2) -> Logistic:
    """The classifier fitted on ``problems``: label the better modality, weight by how much better."""
    x = np.vstack([p.embedding for p in problems])
    gains = np.array([p.gain for p in problems])
    return fit_logistic(x, (gains > 0).astype(float), np.abs(gains), l2)


def base_rate(problems: Sequence[ModalityProblem]) -> Modality:
    """The modality better on average over ``problems`` (a program where they tie)."""
    return "program" if float(np.mean([p.gain for p in problems])) >= 0 else "thought"


# ------------------------------------------------------------------------------ choices
def rule_choice(task: str) -> Modality:
    """The modality the task-type rules route to: a chain of thought for ``open``, else a program."""
    return "thought" if task == OPEN else "program"


def served_choice(task: str, probability: float, threshold: float | None) -> Modality:
    """What the gateway serves: the rule's modality, except an ``open`` prompt whose probability
    reaches the threshold goes to a program (``None``: no threshold, the rule everywhere)."""
    if task == OPEN and threshold is not None and probability >= threshold:
        return "program"
    return rule_choice(task)


def fit_threshold(problems: Sequence[ModalityProblem], probabilities: Sequence[float]) -> float | None:
    """The threshold at which switching the ``open`` problems whose probability reaches it gains
    most over the rule, the highest of those that gain most (it switches the fewest prompts);
    ``None`` where no threshold gains."""
    opened = [(p.gain, q) for p, q in zip(problems, probabilities, strict=True) if p.task == OPEN]
    best, chosen = 0.0, None
    for t in THRESHOLDS:
        gain = sum(g for g, q in opened if q >= t)
        if gain > 1e-12 and gain >= best - 1e-12:
            best, chosen = max(best, gain), t
    return chosen


# ------------------------------------------------------------------------------ judging
def leave_one_family_out(problems: Sequence[ModalityProblem], l2: float = L2) -> tuple[np.ndarray, list[Modality]]:
    """Each problem's probability from the classifier fitted without its family, and the base
    rate of the families that fit saw."""
    probabilities = np.zeros(len(problems))
    rates: list[Modality] = ["program"] * len(problems)
    for family in sorted({p.family for p in problems}):
        held = [i for i, p in enumerate(problems) if p.family == family]
        train = [p for p in problems if p.family != family]
        if not train:
            probabilities[held] = 0.5
            continue
        model = fit_problems(train, l2)
        probabilities[held] = model.probability(np.vstack([problems[i].embedding for i in held]))
        rate = base_rate(train)
        for i in held:
            rates[i] = rate
    return probabilities, rates


def compare(
    problems: Sequence[ModalityProblem], chosen: Sequence[Modality], against: Sequence[Modality], seed: int = 0
) -> dict[str, Any]:
    """Accuracy of the ``chosen`` modalities against the ``against`` ones on the same problems:
    both accuracies, how often each is strictly better, and the paired difference with its 95%
    bootstrap interval over problems."""
    mine = [p.accuracy(c) for p, c in zip(problems, chosen, strict=True)]
    theirs = [p.accuracy(c) for p, c in zip(problems, against, strict=True)]
    difference = paired_difference(mine, theirs, seed)
    return {
        "problems": len(problems),
        "accuracy": float(np.mean(mine)) if mine else None,
        "against": float(np.mean(theirs)) if theirs else None,
        "wins": sum(a > b for a, b in zip(mine, theirs, strict=True)),
        "losses": sum(a < b for a, b in zip(mine, theirs, strict=True)),
        "difference": difference["mean"],
        "interval": difference["interval"],
    }


def figures(
    problems: Sequence[ModalityProblem], probabilities: Sequence[float], rates: Sequence[Modality],
    threshold: float | None, seed: int = 0,
) -> dict[str, Any]:  # fmt: skip
    """One group's figures: the classifier's choice (a program where its probability reaches one
    half) against the rule and against the base rate, and the served choice (the rule with the
    ``open`` prompts switched at ``threshold``) against the rule, over all and over ``open`` prompts."""
    rule = [rule_choice(p.task) for p in problems]
    classifier: list[Modality] = ["program" if q >= 0.5 else "thought" for q in probabilities]
    served = [served_choice(p.task, float(q), threshold) for p, q in zip(problems, probabilities, strict=True)]
    opened = [i for i, p in enumerate(problems) if p.task == OPEN]
    return {
        "problems": len(problems),
        "open": len(opened),
        "labels": {k: sum(p.label == k for p in problems) for k in ("program", "thought", "tie")},
        "classifier_vs_rule": compare(problems, classifier, rule, seed),
        "classifier_vs_base_rate": compare(problems, classifier, list(rates), seed),
        "served_vs_rule": compare(problems, served, rule, seed),
        "served_vs_rule_open": compare(
            [problems[i] for i in opened], [served[i] for i in opened], [rule[i] for i in opened], seed
        ),
    }


def switched_on(pooled: Mapping[str, Any]) -> tuple[bool, str]:
    """The gate, read off the pooled left-out figures: on where the served switch beats the rule
    on ``open`` prompts (paired 95% interval above zero) and the classifier beats the base rate."""
    served, rate = pooled["served_vs_rule_open"], pooled["classifier_vs_base_rate"]
    if not served["problems"]:
        return False, "no open prompt in the pools: the switch was never judged"
    if served["interval"][0] <= 0:
        low, high = served["interval"]
        return False, (f"the switch on {served['problems']} open prompts gains {served['difference']:+.3f} over the "
                       f"rule, paired 95% interval [{low:+.3f}, {high:+.3f}] reaches zero")  # fmt: skip
    if rate["difference"] <= 0:
        return False, (f"the classifier does not beat the base rate on left-out families ({rate['difference']:+.3f}): "
                       "it would send prompts the pools never saw (prose) to a program")  # fmt: skip
    return True, f"the switch gains {served['difference']:+.3f} on open prompts and beats the base rate"


def grouped(
    problems: Sequence[ModalityProblem], probabilities: Sequence[float], rates: Sequence[Modality],
    threshold: float | None, seed: int = 0,
) -> dict[str, Any]:  # fmt: skip
    """:func:`figures` per family and pooled over every family."""
    per_family = {}
    for family in sorted({p.family for p in problems}):
        idx = [i for i, p in enumerate(problems) if p.family == family]
        per_family[family] = figures([problems[i] for i in idx], [probabilities[i] for i in idx],
                                     [rates[i] for i in idx], threshold, seed)  # fmt: skip
    return {"pooled": figures(problems, probabilities, rates, threshold, seed), "per_family": per_family}


def rows_of(
    problems: Sequence[ModalityProblem], probabilities: Sequence[float], rates: Sequence[Modality],
    threshold: float | None,
) -> list[dict[str, Any]]:  # fmt: skip
    """One raw row per problem: both accuracies, the probability, the base rate and the served choice."""
    return [{"id": p.id, "family": p.family, "task_type": p.task, "program": p.program, "thought": p.thought,
             "probability": round(float(q), 6), "base_rate": r, "served": served_choice(p.task, float(q), threshold)}
            for p, q, r in zip(problems, probabilities, rates, strict=True)]  # fmt: skip


def lofo_report(problems: Sequence[ModalityProblem], l2: float = L2, seed: int = 0) -> dict[str, Any]:
    """The leave-one-family-out judgement: the threshold fitted on its probabilities, the figures
    per left-out family and pooled, the gate's verdict, and the per-problem rows."""
    found, rates = leave_one_family_out(problems, l2)
    probabilities = found.tolist()
    threshold = fit_threshold(problems, probabilities)
    report = grouped(problems, probabilities, rates, threshold, seed)
    on, why = switched_on(report["pooled"])
    return {"threshold": threshold, "switched_on": on, "why": why, **report,
            "per_problem": rows_of(problems, probabilities, rates, threshold)}  # fmt: skip


def applied_report(
    model: Logistic, rate: Modality, threshold: float | None, problems: Sequence[ModalityProblem], seed: int = 0
) -> dict[str, Any]:
    """The classifier fitted on every calibration family, with its threshold and base rate, applied
    to other problems (the development pools: families it saw, problems it did not)."""
    if not problems:
        return {"pooled": None, "per_family": {}, "per_problem": []}
    probabilities = model.probability(np.vstack([p.embedding for p in problems])).tolist()
    rates: list[Modality] = [rate] * len(problems)
    return {**grouped(problems, probabilities, rates, threshold, seed),
            "per_problem": rows_of(problems, probabilities, rates, threshold)}  # fmt: skip

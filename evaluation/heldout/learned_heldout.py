"""The learned routers measured on the development split's pools: which router predicts best on
problems no fit saw; measured, not served.

Every router is fitted on every calibration pool and scored on every development pool, no folds:
the table (:func:`evaluation.routing.learned_router.route_table`, route_fit's stable choice per task type and
bin), ridge and kNN per configuration (:func:`evaluation.routing.learned_router.route_learned`), kNN shrunk
towards the task type's mean, and kNN under the table's stability rule
(:func:`evaluation.routing.learned_router.route_neighbourhood`). Beside them, per effort, the best fixed
configuration within the effort's budget on the development problems themselves (an oracle:
:func:`evaluation.heldout.ladder.best_fixed`). Rows, intervals and best-fixed come from
:mod:`evaluation.heldout.ladder`, so the figures are read as the served ladder's are. Each router's
"steps down" are listed: a family whose mean accuracy falls from one effort to the next.
Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import evaluation.routing.learned_router as lr
from evaluation.heldout.ladder import ALL, DEFAULT, Outcomes, best_fixed, summarize
from evaluation.routing.route_fit import budgets_for
from evaluation.routing.router_problems import RouterProblem
from evaluation.routing.types import BUDGET_MULTIPLES

Router = Callable[[Sequence[RouterProblem], Sequence[RouterProblem]], list[dict[str, str]]]


def routers(k: int = 5, alpha: float = 10.0, shrink: float = 0.5,
            multiples: Mapping[str, float] = BUDGET_MULTIPLES) -> dict[str, Router]:  # fmt: skip
    """The routers compared, by name; ``table`` first (the others are read against it)."""
    return {
        "table": lambda tr, te: lr.route_table(tr, te, multiples),
        "ridge": lambda tr, te: lr.route_learned(tr, te, lr.ridge_predictor(alpha), multiples),
        "knn": lambda tr, te: lr.route_learned(tr, te, lr.knn_predictor(k), multiples),
        "knn_shrunk": lambda tr, te: lr.route_learned(tr, te, lr.knn_predictor(k), multiples, shrink=shrink),
        "knn_stable": lambda tr, te: lr.route_neighbourhood(tr, te, k, multiples),
    }


def budgets_of(
    train: Sequence[RouterProblem], test: Sequence[RouterProblem], multiples: Mapping[str, float]
) -> dict[str, tuple[str, Mapping[str, float]]]:
    """Per test problem, the budgets its routes were chosen under (its task type's on the
    training problems; ``default`` where calibration never saw the task type)."""
    seen = {p.task for p in train}
    return {
        p.stats.problem_id: (
            p.task if p.task in seen else DEFAULT,
            budgets_for([s.stats for s in lr.scope_of(train, p.task)], multiples),
        )
        for p in test
    }


def steps_down(
    test: Sequence[RouterProblem], routes: Sequence[Mapping[str, str]], efforts: Sequence[str]
) -> list[dict[str, Any]]:
    """Every (family, effort) where the family's mean accuracy under ``routes`` falls below the
    previous effort's."""
    out = []
    for family in dict.fromkeys(p.family for p in test):
        rows = [(p, r) for p, r in zip(test, routes, strict=True) if p.family == family]
        acc = [sum(p.stats.configs[r[e]].accuracy for p, r in rows) / len(rows) for e in efforts]
        for i in range(1, len(efforts)):
            if acc[i] < acc[i - 1] - 1e-9:
                out.append({"family": family, "from": efforts[i - 1], "to": efforts[i], "problems": len(rows),
                            "before": acc[i - 1], "after": acc[i]})  # fmt: skip
    return out


def evaluate_heldout(
    train: Sequence[RouterProblem], test: Sequence[RouterProblem], named: Mapping[str, Router], *, seed: int = 0,
    multiples: Mapping[str, float] = BUDGET_MULTIPLES,
) -> dict[str, Any]:  # fmt: skip
    """Per group (each task kind, then ``all``): every router's row per effort, its paired
    difference from the table, and the best fixed configuration per effort; every router's
    steps down; and each problem's route and outcome."""
    efforts = list(multiples)
    routed = {name: route(train, test) for name, route in named.items()}
    outcomes = Outcomes({p.stats.problem_id: p.stats for p in test}, {})
    budgets = budgets_of(train, test, multiples)
    groups: dict[str, list[int]] = {}
    for i, p in enumerate(test):
        groups.setdefault(p.kind, []).append(i)
    groups[ALL] = list(range(len(test)))
    out: dict[str, Any] = {}
    for group, idx in groups.items():
        members = [test[i] for i in idx]

        def accuracy(
            name: str, effort: str, members: Sequence[RouterProblem] = members, idx: Sequence[int] = idx
        ) -> list[float]:
            return [p.stats.configs[routed[name][i][effort]].accuracy for p, i in zip(members, idx, strict=True)]

        def row(name: str, effort: str, idx: Sequence[int] = idx) -> dict[str, Any]:
            pairs = [(test[i].stats.problem_id, routed[name][i][effort]) for i in idx]
            return summarize(effort, pairs, outcomes, seed).as_dict()

        rows = {name: {e: row(name, e) for e in efforts} for name in routed}
        versus = {name: {e: lr.paired_difference(accuracy(name, e), accuracy("table", e), seed) for e in efforts}
                  for name in routed if name != "table"}  # fmt: skip
        fixed = best_fixed([p.stats for p in members], budgets, efforts, outcomes, seed)
        out[group] = {"problems": len(idx), "routers": rows, "minus_table": versus,
                      "best_fixed": {b.effort: b.as_dict() for b in fixed}}  # fmt: skip
    return {
        "groups": out,
        "steps_down": {name: steps_down(test, r, efforts) for name, r in routed.items()},
        "per_problem": [
            {
                "id": p.stats.problem_id,
                "family": p.family,
                "kind": p.kind,
                "task_type": p.task,
                "routes": {n: {e: routed[n][i][e] for e in efforts} for n in routed},
            }
            for i, p in enumerate(test)
        ],
    }


def markdown(result: Mapping[str, Any]) -> str:
    """Per group and effort: each router's accuracy [95%] and cost, its difference from the
    table [95%], and the best fixed configuration within the budget."""
    lines = []
    for group, g in result["groups"].items():
        names = list(g["routers"])
        lines += [f"### {group} ({g['problems']} development problems)", "",
                  "| effort | " + " | ".join(names) + " | best fixed within budget |",
                  "|---" * (len(names) + 2) + "|"]  # fmt: skip
        for e in g["routers"][names[0]]:
            cells = []
            for n in names:
                r = g["routers"][n][e]
                cell = f"{r['accuracy']:.3f} [{r['interval'][0]:.2f}, {r['interval'][1]:.2f}] c{r['cost']:.0f}"
                if n in g["minus_table"]:
                    d = g["minus_table"][n][e]
                    cell += f"; {d['mean']:+.3f} [{d['interval'][0]:+.2f}, {d['interval'][1]:+.2f}]"
                cells.append(cell)
            b = g["best_fixed"].get(e)
            best = f"{b['config']} {b['summary']['accuracy']:.3f} c{b['summary']['cost']:.0f}" if b else "-"
            lines.append(f"| `{e}` | " + " | ".join(cells) + f" | {best} |")
        lines.append("")
    for name, steps in result["steps_down"].items():
        told = ", ".join(f"{s['family']} {s['from']}->{s['to']} {s['before']:.3f}->{s['after']:.3f} ({s['problems']})"
                         for s in steps)  # fmt: skip
        lines.append(f"- steps down, {name}: {told or 'none'}")
    return "\n".join(lines)

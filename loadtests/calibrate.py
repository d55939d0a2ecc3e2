"""``python -m loadtests calibrate``: from a calibration run (and optionally a held-out run) to a
routing table the gateway loads, a difficulty model, and an honest held-out comparison.

Two difficulty estimators are fitted and compared on the held-out split, each with its own
bins and routes:
- ``embedding`` (served by default): a ridge over the prompt's MiniLM embedding and text
  features (``services/common/difficulty_features.py``, the gateway's own feature function),
  regressed on 1 - pass@1 of the calibration problems. It generates no tokens; the table
  carries its fitted parameters inline, and its bins are calibration quantiles of its output;
- ``probe``: the agreement of a few short samples (the gateway's probe), on the base table's
  bins; served when embeddings are turned off.
Routes are chosen per effort and bin, and per task type where enough calibration problems of
that type were measured (program-of-thought only for arithmetic and math word problems). The
table records its provenance: data, model, date, report.
"""

from __future__ import annotations

import datetime
import html
import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from evaluation.calibration import (
    BUDGET_MULTIPLES,
    Choice,
    PolicyResult,
    ProblemStats,
    RidgeEstimator,
    bin_of,
    choose_routes,
    choose_task_routes,
    effort_budgets,
    evaluate_adaptive,
    evaluate_fixed,
    fit_ridge,
    pin_effort,
    problem_stats,
    quantile_edges,
    single_sample_label,
    spearman,
    verdict,
)
from evaluation.datasets import assert_disjoint
from evaluation.embeddings import feature_rows
from evaluation.records import iter_records, read_problems, read_run_meta
from loadtests.grid import parse_cell
from services.common.difficulty_features import FEATURE_SET
from services.common.task_type import TaskType, classify_task


def _stats(
    run_dir: Path, probe_samples: int, gateway_difficulty: bool = True
) -> tuple[list[ProblemStats], dict[str, Any]]:
    problems = read_problems(run_dir)
    records = list(iter_records(run_dir))
    if not gateway_difficulty:  # the gateway's reported difficulty is another estimator's: use agreement
        records = [replace(r, difficulty=None) for r in records]
    stats = problem_stats(records, {k: p.question for k, p in problems.items()}, probe_samples)
    return list(stats.values()), problems


def _route_json(choice: Choice, token_budget: int) -> dict[str, Any]:
    """A chosen configuration label (``name:n=4:mode=hybrid``) as a routing-table route."""
    cell = parse_cell(choice.config)
    route: dict[str, Any] = {
        "strategy": cell.strategy,
        "n": cell.n or 1,
        "token_budget": cell.token_budget or token_budget,
    }
    if cell.verifier:
        route["verifier"] = cell.verifier
    if cell.params:
        route["params"] = dict(cell.params)
    return route


def _effort_routes(bins: dict[str, Choice], max_tokens: dict[str, float]) -> dict[str, Any]:
    """Per-bin routes, or one ``"*"`` route when every bin chose the same configuration: then
    the gateway skips the difficulty probe, whose tokens would buy nothing."""

    def route(choice: Choice) -> dict[str, Any]:
        return _route_json(choice, max(256, int(1.5 * max_tokens.get(choice.config, 256))))

    if len({c.config for c in bins.values()}) == 1:
        return {"*": route(next(iter(bins.values())))}
    return {name: route(choice) for name, choice in bins.items()}


ESTIMATOR_KINDS = ("probe", "embedding")
_PROBE_KEYS = ("samples", "max_tokens", "temperature")


@dataclass
class Fitted:
    """One estimator's calibration: per-problem difficulty, bin edges, default and task routes."""

    kind: str
    edges: list[tuple[str, float]]
    routes: dict[str, dict[str, Choice]]
    task_routes: dict[TaskType, dict[str, dict[str, Choice]]]


def _fit_routes(
    kind: str, cal: list[ProblemStats], difficulty: dict[str, float], edges: list[tuple[str, float]],
    budgets: dict[str, float], task_of: dict[str, TaskType], min_task_problems: int,
) -> Fitted:  # fmt: skip
    bins = {pid: bin_of(d, edges) for pid, d in difficulty.items()}
    routes = choose_routes(cal, bins, edges, budgets)
    return Fitted(kind, edges, routes, choose_task_routes(cal, task_of, bins, edges, budgets, min_task_problems))


def _probe_difficulty(stats: list[ProblemStats]) -> dict[str, float]:
    return {s.problem_id: s.probe_difficulty if s.probe_difficulty is not None else 0.5 for s in stats}


def _varies(routes: dict[str, Choice]) -> bool:
    return len({c.config for c in routes.values()}) > 1


def _table_routes(fitted: Fitted, max_tokens: dict[str, float]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``routes`` and ``task_routes`` as the table writes them; a task type keeps only the
    efforts where its routes differ from the default ones."""
    routes = {effort: _effort_routes(bins, max_tokens) for effort, bins in fitted.routes.items()}
    task_routes: dict[str, Any] = {}
    for task, efforts in fitted.task_routes.items():
        own = {e: r for e, bins in efforts.items() if (r := _effort_routes(bins, max_tokens)) != routes.get(e)}
        if own:
            task_routes[task] = own
    return routes, task_routes


def _provenance(
    calibration_run: Path, out: Path, cal_problems: dict[str, Any], task_of: dict[str, TaskType], kind: str,
    heldout: dict[str, Any] | None,
) -> dict[str, Any]:  # fmt: skip
    meta = read_run_meta(calibration_run)
    return {
        "data": {
            "calibration_run": str(calibration_run),
            "problems": len(task_of),
            "datasets": dict(sorted(Counter(p.dataset for p in cal_problems.values()).items())),
            "task_types": dict(sorted(Counter(task_of.values()).items())),
            "heldout_run": heldout["run"] if heldout else None,
            "heldout_problems": heldout["problems"] if heldout else None,
        },
        "model": meta.get("model"),
        "sampling": {k: v for k, v in meta.get("config", {}).items() if k in ("temperature", "max_tokens")},
        "git": meta.get("git"),
        "date": datetime.date.today().isoformat(),
        "estimator": kind,
        "heldout_spearman": heldout["estimator_spearman"].get(kind) if heldout else None,
        "report": str(out / "calibration.json"),
    }


def calibrate(
    calibration_run: Path, out: Path, *, base_table: Path, heldout_run: Path | None = None,
    single_label: str = "single", multiples: dict[str, float] | None = None, alpha: float = 10.0,
    use_embeddings: bool = True, features: Callable[[Sequence[str]], np.ndarray] | None = None,
    min_task_problems: int = 6,
) -> dict[str, Any]:  # fmt: skip
    """Write ``routing.json`` (with provenance), ``calibration.json`` and, with embeddings,
    ``difficulty_model.json`` under ``out``.

    The table serves the zero-token ``embedding`` estimator when ``use_embeddings`` (else the
    probe): its ridge is fitted here on ``features`` rows (default: the gateway's own feature
    function over the numpy MiniLM encoder, ``feature_rows``), and its bins are the calibration
    quantiles of its predictions. Task types with at least ``min_task_problems`` calibration
    problems get routes of their own."""
    table = json.loads(base_table.read_text())
    base_estimator = table.get("estimator", {})
    probe = {"kind": "probe", **{k: base_estimator[k] for k in _PROBE_KEYS if k in base_estimator}}
    probe_samples = int(probe.get("samples", 3))
    cal, cal_problems = _stats(calibration_run, probe_samples)
    if len(cal) < 3:
        raise ValueError(f"calibration run {calibration_run} has only {len(cal)} scored problems; need >= 3")
    names = [b["name"] for b in table["difficulty_bins"]]
    edges = [(b["name"], float(b["max"])) for b in table["difficulty_bins"]]
    single_label = single_sample_label(cal, single_label)
    budgets = effort_budgets(cal, single_label, multiples or BUDGET_MULTIPLES)
    task_of = {s.problem_id: classify_task(s.question) for s in cal}
    cal_y = np.array([1.0 - s.pass1 for s in cal])
    fitted = {"probe": _fit_routes("probe", cal, _probe_difficulty(cal), edges, budgets, task_of, min_task_problems)}
    rows = features or feature_rows
    model = None
    result: dict[str, Any] = {"calibration_run": str(calibration_run), "calibration_problems": len(cal)}
    if use_embeddings:
        cal_x = rows([s.question for s in cal])
        model = fit_ridge(cal_x, cal_y, alpha)
        cal_pred = model.predict(cal_x)
        difficulty = {s.problem_id: float(p) for s, p in zip(cal, cal_pred, strict=True)}
        fitted["embedding"] = _fit_routes(
            "embedding", cal, difficulty, quantile_edges(cal_pred, names), budgets, task_of, min_task_problems
        )
        result["embedding_fit_spearman"] = spearman(cal_pred, cal_y)
    for f in fitted.values():  # `none` is one greedy sample of the bare model, whatever is cheaper
        pin_effort(f.routes, "none", cal, single_label)
        for efforts in f.task_routes.values():
            pin_effort(efforts, "none", cal, single_label)
    served = fitted["embedding" if model is not None else "probe"]
    # A route's token budget caps generated tokens: size it from the most any problem generated.
    max_tokens = {
        c: max(s.configs[c].generated_tokens for s in cal if c in s.configs)
        for c in {c for s in cal for c in s.configs}
    }
    result |= {
        "estimator": served.kind,
        "budgets": budgets,
        "task_types": dict(sorted(Counter(task_of.values()).items())),
        "routes": {e: {b: asdict(c) for b, c in bins.items()} for e, bins in served.routes.items()},
        "task_routes": {
            t: {e: {b: asdict(c) for b, c in bins.items()} for e, bins in efforts.items()}
            for t, efforts in served.task_routes.items()
        },
        "estimators": {
            k: {"bins": f.edges, "routes": {e: {b: c.config for b, c in bins.items()} for e, bins in f.routes.items()}}
            for k, f in fitted.items()
        },
    }
    if heldout_run is not None:
        # The held-out run is served on this calibration's table: its routed requests report that
        # estimator's difficulty, so the probe's values come from sample agreement there.
        held, held_problems = _stats(heldout_run, probe_samples, gateway_difficulty=served.kind == "probe")
        assert_disjoint(list(cal_problems.values()), list(held_problems.values()))
        probe_cost = float(probe_samples * int(probe.get("max_tokens", 48)))
        result["heldout"] = _heldout(heldout_run, held, fitted, model, rows, probe_cost, budgets)
    routes, task_routes = _table_routes(served, max_tokens)
    estimator = {"kind": "embedding", "features": FEATURE_SET, "ridge": model.to_json()} if model else probe
    new_table = {
        "version": int(table.get("version", 1)) + 1,
        "description": (
            f"Calibrated from {calibration_run.name}: {len(cal)} calibration problems; per task type, effort and "
            f"{served.kind}-difficulty bin, the measured configuration with the best accuracy within the effort's "
            f"mean-token budget ({', '.join(f'{e}={b:.0f}' for e, b in budgets.items())})."
        ),
        "provenance": _provenance(calibration_run, out, cal_problems, task_of, served.kind, result.get("heldout")),
        "estimator": estimator,
        "difficulty_bins": [{"name": n, "max": m} for n, m in served.edges],
        "routes": routes,
        "task_routes": task_routes,
    }
    from services.gateway.routing import RoutingTable

    RoutingTable.model_validate(new_table)  # the gateway must accept what we write
    out.mkdir(parents=True, exist_ok=True)
    (out / "routing.json").write_text(json.dumps(new_table, indent=2))
    if model is not None:
        (out / "difficulty_model.json").write_text(
            json.dumps({"features": FEATURE_SET, "bins": fitted["embedding"].edges, **model.to_json()})
        )
    (out / "calibration.json").write_text(json.dumps(result, indent=2, default=str))
    return result


def _heldout(
    run: Path, held: list[ProblemStats], fitted: dict[str, Fitted], model: RidgeEstimator | None,
    rows: Callable[[Sequence[str]], np.ndarray], probe_cost: float, budgets: dict[str, float],
) -> dict[str, Any]:  # fmt: skip
    """Every estimator's Spearman and adaptive routing against every fixed configuration."""
    held_y = np.array([1.0 - s.pass1 for s in held])
    predictions = {"probe": np.array(list(_probe_difficulty(held).values()))}
    if model is not None:
        predictions["embedding"] = model.predict(rows([s.question for s in held]))
    task_of = {s.problem_id: classify_task(s.question) for s in held}
    fixed = evaluate_fixed(held)
    adaptive: dict[str, list[PolicyResult]] = {}
    for kind, f in fitted.items():
        bins = {s.problem_id: bin_of(float(p), f.edges) for s, p in zip(held, predictions[kind], strict=True)}
        adaptive[kind] = []
        for effort, routes in f.routes.items():
            # Only the probe costs tokens, and only for an effort whose routes depend on the bin.
            varies = _varies(routes) or any(_varies(t[effort]) for t in f.task_routes.values() if effort in t)
            cost = probe_cost if kind == "probe" and varies else 0.0
            task_routes = {t: r[effort] for t, r in f.task_routes.items()}
            adaptive[kind].append(
                evaluate_adaptive(f"adaptive[{effort}, {kind}]", held, bins, routes, cost, task_routes, task_of)
            )
    high_budget = budgets.get("high", max(budgets.values()))
    in_budget = [f for f in fixed if f.tokens <= high_budget] or fixed
    reference = max(in_budget, key=lambda f: (f.accuracy, -f.tokens))
    best_adaptive = {
        kind: max((r for r in results if r.tokens <= 0.5 * reference.tokens), key=lambda r: r.accuracy, default=None)
        or max(results, key=lambda r: r.accuracy)
        for kind, results in adaptive.items()
    }
    return {
        "run": str(run),
        "problems": len(held),
        "probe_tokens_charged": probe_cost,
        "estimator_spearman": {k: spearman(p, held_y) for k, p in predictions.items()},
        "fixed": [asdict(f) for f in fixed],
        "adaptive": {k: [asdict(r) for r in v] for k, v in adaptive.items()},
        "reference": asdict(reference),
        "verdict": {k: verdict(v, reference) for k, v in best_adaptive.items()},
    }


def html_section(result: dict[str, Any]) -> str:
    """The calibration results as an HTML fragment for the report page."""
    parts = [f"<p>Calibration problems: {result['calibration_problems']} (task types: "
             + html.escape(", ".join(f"{t} {n}" for t, n in result.get("task_types", {}).items())) + "); "
             + f"estimator served: {html.escape(str(result.get('estimator', 'probe')))}; effort budgets "
             + "(mean tokens per request): "
             + html.escape(", ".join(f"{e}={b:.0f}" for e, b in result["budgets"].items())) + "</p>"]  # fmt: skip

    def route_rows(task: str, routes: dict[str, Any]) -> str:
        return "".join(
            f"<tr><td>{html.escape(task)}</td><td>{html.escape(e)}</td><td>{html.escape(b)}</td>"
            f"<td>{html.escape(c['config'])}</td><td>{100 * c['accuracy']:.1f}%</td><td>{c['tokens']:.0f}</td>"
            f"<td>{c['problems']}</td></tr>"
            for e, bins in routes.items()
            for b, c in bins.items()
        )

    rows = route_rows("(default)", result["routes"]) + "".join(
        route_rows(t, r) for t, r in result.get("task_routes", {}).items()
    )
    parts.append("<h3>Routing table</h3><table><tr><th>task type</th><th>effort</th><th>bin</th>"
                 "<th>configuration</th><th>cal. accuracy</th><th>cal. tokens</th><th>problems</th></tr>"
                 f"{rows}</table>")  # fmt: skip
    held = result.get("heldout")
    if held:

        def line(r: dict[str, Any]) -> str:
            return (f"<tr><td>{html.escape(r['name'])}</td><td>{100 * r['accuracy']:.1f}%</td>"
                    f"<td>{r['tokens']:.0f}</td><td>{r['problems']}</td></tr>")  # fmt: skip

        body = "".join(line(r) for r in held["fixed"]) + "".join(
            line(r) for results in held["adaptive"].values() for r in results
        )
        sp = ", ".join(f"{html.escape(k)} {v:.2f}" for k, v in held["estimator_spearman"].items())
        parts.append(
            f"<h3>Held-out: adaptive routing vs every fixed configuration ({held['problems']} problems)</h3>"
            f"<p>Difficulty estimators, Spearman with held-out 1 - pass@1: {sp}. Adaptive probe rows are "
            f"charged {held['probe_tokens_charged']:.0f} probe tokens per problem; the embedding estimator "
            "generates none.</p>"
            "<table><tr><th>policy</th><th>accuracy</th><th>tokens/problem</th><th>problems</th></tr>"
            f"{body}</table><ul>"
            + "".join(f"<li>{html.escape(k)}: {html.escape(v)}</li>" for k, v in held["verdict"].items())
            + "</ul>"
        )
    return "".join(parts)

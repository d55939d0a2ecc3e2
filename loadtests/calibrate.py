"""``python -m loadtests calibrate``: from a calibration run (and optionally a held-out run) to a
routing table the gateway loads, a difficulty model, and an honest held-out comparison.

Two difficulty estimators are fitted and compared on the held-out split:
- ``probe``: the gateway's own estimate (agreement of a few samples), the only one the gateway
  can compute today, so the routing table's bins are on this scale;
- ``ridge``: all-MiniLM prompt embeddings plus probe agreement, regressed on 1 - pass@1 of
  the calibration problems; written to ``difficulty_model.json`` (a gateway estimator kind for
  it does not exist yet - its held-out numbers say whether adding one would pay).
"""

from __future__ import annotations

import html
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from services.evaluation.calibration import (
    BUDGET_MULTIPLES,
    Choice,
    PolicyResult,
    ProblemStats,
    bin_of,
    choose_routes,
    effort_budgets,
    evaluate_adaptive,
    evaluate_fixed,
    feature_matrix,
    fit_ridge,
    problem_stats,
    spearman,
    verdict,
)
from services.evaluation.datasets import assert_disjoint
from services.evaluation.records import iter_records, read_problems


def _stats(run_dir: Path, probe_samples: int) -> tuple[list[ProblemStats], dict[str, Any]]:
    problems = read_problems(run_dir)
    stats = problem_stats(list(iter_records(run_dir)), {k: p.question for k, p in problems.items()}, probe_samples)
    return list(stats.values()), problems


def _route_json(choice: Choice, token_budget: int) -> dict[str, Any]:
    name, _, rest = choice.config.partition(":")
    route: dict[str, Any] = {"strategy": name, "n": 1, "token_budget": token_budget}
    for option in filter(None, rest.split(":")):
        key, _, value = option.partition("=")
        if key == "n":
            route["n"] = int(value)
        elif key == "budget":
            route["token_budget"] = int(value)
        elif key == "verifier":
            route["verifier"] = value
    return route


def _effort_routes(bins: dict[str, Choice], max_tokens: dict[str, float]) -> dict[str, Any]:
    """Per-bin routes, or one ``"*"`` route when every bin chose the same configuration: then
    the gateway skips the difficulty probe, whose tokens would buy nothing."""

    def route(choice: Choice) -> dict[str, Any]:
        return _route_json(choice, max(256, int(1.5 * max_tokens.get(choice.config, 256))))

    if len({c.config for c in bins.values()}) == 1:
        return {"*": route(next(iter(bins.values())))}
    return {name: route(choice) for name, choice in bins.items()}


def calibrate(
    calibration_run: Path, out: Path, *, base_table: Path, heldout_run: Path | None = None,
    single_label: str = "single", multiples: dict[str, float] | None = None, alpha: float = 10.0,
    use_embeddings: bool = True,
) -> dict[str, Any]:  # fmt: skip
    """Write ``routing.json``, ``difficulty_model.json`` and ``calibration.json`` under ``out``."""
    table = json.loads(base_table.read_text())
    probe = table.get("estimator", {})
    probe_samples = int(probe.get("samples", 3))
    cal, cal_problems = _stats(calibration_run, probe_samples)
    if len(cal) < 3:
        raise ValueError(f"calibration run {calibration_run} has only {len(cal)} scored problems; need >= 3")
    edges = [(b["name"], float(b["max"])) for b in table["difficulty_bins"]]
    budgets = effort_budgets(cal, single_label, multiples or BUDGET_MULTIPLES)

    # Routes on the gateway's probe scale: what the gateway will actually look up.
    probe_bins = {
        s.problem_id: bin_of(s.probe_difficulty if s.probe_difficulty is not None else 0.5, edges) for s in cal
    }
    routes = choose_routes(cal, probe_bins, edges, budgets)
    max_tokens = {
        c: max(s.configs[c].tokens for s in cal if c in s.configs) for c in {c for s in cal for c in s.configs}
    }
    new_table = {
        "version": int(table.get("version", 1)) + 1,
        "description": (
            f"Calibrated from {calibration_run.name}: {len(cal)} calibration problems; per effort and probe-difficulty "
            f"bin, the measured configuration with the best accuracy within the effort's mean-token budget "
            f"({', '.join(f'{e}={b:.0f}' for e, b in budgets.items())})."
        ),
        "estimator": probe,
        "difficulty_bins": table["difficulty_bins"],
        "routes": {effort: _effort_routes(bins, max_tokens) for effort, bins in routes.items()},
    }
    from services.gateway.routing import RoutingTable

    RoutingTable.model_validate(new_table)  # the gateway must accept what we write
    out.mkdir(parents=True, exist_ok=True)
    (out / "routing.json").write_text(json.dumps(new_table, indent=2))

    # The ridge estimator: embeddings + probe agreement -> 1 - pass@1.
    embed = None
    if use_embeddings:
        from services.evaluation.embeddings import embed as embed_fn

        embed = embed_fn
    cal_x = feature_matrix(cal, embed([s.question for s in cal]) if embed else None)
    cal_y = np.array([1.0 - s.pass1 for s in cal])
    model = fit_ridge(cal_x, cal_y, alpha)
    cal_pred = model.predict(cal_x)
    # Ridge bins: calibration quantiles of the prediction, so each bin holds a third of problems.
    qs = np.quantile(cal_pred, np.linspace(0, 1, len(edges) + 1)[1:-1]).tolist() if len(cal_pred) else []
    ridge_edges = [(name, float(q)) for (name, _), q in zip(edges, [*qs, 1.0], strict=True)]
    cal_ridge_bins = {s.problem_id: bin_of(float(p), ridge_edges) for s, p in zip(cal, cal_pred, strict=True)}
    ridge_routes = choose_routes(cal, cal_ridge_bins, ridge_edges, budgets)
    (out / "difficulty_model.json").write_text(
        json.dumps(
            {
                "features": ["minilm_embedding" if embed else None, "probe_agreement"],
                "bins": ridge_edges,
                **model.to_json(),
            }
        )
    )
    result: dict[str, Any] = {
        "calibration_run": str(calibration_run),
        "calibration_problems": len(cal),
        "budgets": budgets,
        "routes": {e: {b: asdict(c) for b, c in bins.items()} for e, bins in routes.items()},
        "ridge_routes": {e: {b: asdict(c) for b, c in bins.items()} for e, bins in ridge_routes.items()},
        "ridge_fit_spearman": spearman(cal_pred, cal_y),
    }
    if heldout_run is not None:
        held, held_problems = _stats(heldout_run, probe_samples)
        assert_disjoint(list(cal_problems.values()), list(held_problems.values()))
        held_y = np.array([1.0 - s.pass1 for s in held])
        held_x = feature_matrix(held, embed([s.question for s in held]) if embed else None)
        held_pred = model.predict(held_x)
        probe_pred = np.array([s.probe_difficulty if s.probe_difficulty is not None else 0.5 for s in held])
        probe_cost = float(probe_samples * int(probe.get("max_tokens", 48)))
        fixed = evaluate_fixed(held)
        adaptive: dict[str, list[PolicyResult]] = {"probe": [], "ridge": []}
        hb_probe = {s.problem_id: bin_of(float(p), edges) for s, p in zip(held, probe_pred, strict=True)}
        hb_ridge = {s.problem_id: bin_of(float(p), ridge_edges) for s, p in zip(held, held_pred, strict=True)}
        for effort in routes:
            # An effort whose bins all route alike runs no probe (see _effort_routes): no probe charge.
            cost = probe_cost if len({c.config for c in routes[effort].values()}) > 1 else 0.0
            adaptive["probe"].append(
                evaluate_adaptive(f"adaptive[{effort}, probe]", held, hb_probe, routes[effort], cost)
            )
            # The ridge estimator uses probe agreement as a feature: it always pays the probe.
            adaptive["ridge"].append(
                evaluate_adaptive(f"adaptive[{effort}, ridge]", held, hb_ridge, ridge_routes[effort], probe_cost)
            )
        high_budget = budgets.get("high", max(budgets.values()))
        in_budget = [f for f in fixed if f.tokens <= high_budget] or fixed
        reference = max(in_budget, key=lambda f: (f.accuracy, -f.tokens))
        best_adaptive = {
            kind: max(
                (r for r in results if r.tokens <= 0.5 * reference.tokens), key=lambda r: r.accuracy, default=None
            )
            or max(results, key=lambda r: r.accuracy)
            for kind, results in adaptive.items()
        }
        result["heldout"] = {
            "run": str(heldout_run),
            "problems": len(held),
            "probe_tokens_charged": probe_cost,
            "estimator_spearman": {"probe": spearman(probe_pred, held_y), "ridge": spearman(held_pred, held_y)},
            "fixed": [asdict(f) for f in fixed],
            "adaptive": {k: [asdict(r) for r in v] for k, v in adaptive.items()},
            "reference": asdict(reference),
            "verdict": {k: verdict(v, reference) for k, v in best_adaptive.items()},
        }
    (out / "calibration.json").write_text(json.dumps(result, indent=2, default=str))
    return result


def html_section(result: dict[str, Any]) -> str:
    """The calibration results as an HTML fragment for the report page."""
    parts = [f"<p>Calibration problems: {result['calibration_problems']}; effort budgets (mean tokens per request): "
             + html.escape(", ".join(f"{e}={b:.0f}" for e, b in result["budgets"].items())) + "</p>"]  # fmt: skip
    rows = "".join(
        f"<tr><td>{html.escape(e)}</td><td>{html.escape(b)}</td><td>{html.escape(c['config'])}</td>"
        f"<td>{100 * c['accuracy']:.1f}%</td><td>{c['tokens']:.0f}</td><td>{c['problems']}</td></tr>"
        for e, bins in result["routes"].items()
        for b, c in bins.items()
    )
    parts.append("<h3>Routing table (probe bins)</h3><table><tr><th>effort</th><th>bin</th><th>configuration</th>"
                 f"<th>cal. accuracy</th><th>cal. tokens</th><th>problems</th></tr>{rows}</table>")  # fmt: skip
    held = result.get("heldout")
    if held:

        def line(r: dict[str, Any]) -> str:
            return (f"<tr><td>{html.escape(r['name'])}</td><td>{100 * r['accuracy']:.1f}%</td>"
                    f"<td>{r['tokens']:.0f}</td><td>{r['problems']}</td></tr>")  # fmt: skip

        body = "".join(line(r) for r in held["fixed"]) + "".join(
            line(r) for results in held["adaptive"].values() for r in results
        )
        sp = held["estimator_spearman"]
        parts.append(
            f"<h3>Held-out: adaptive routing vs every fixed configuration ({held['problems']} problems)</h3>"
            f"<p>Difficulty estimators, Spearman with held-out 1 - pass@1: probe {sp['probe']:.2f}, "
            f"embedding+probe ridge {sp['ridge']:.2f}. Adaptive rows are charged "
            f"{held['probe_tokens_charged']:.0f} probe tokens per problem.</p>"
            "<table><tr><th>policy</th><th>accuracy</th><th>tokens/problem</th><th>problems</th></tr>"
            f"{body}</table><ul>"
            + "".join(f"<li>{html.escape(k)}: {html.escape(v)}</li>" for k, v in held["verdict"].items())
            + "</ul>"
        )
    return "".join(parts)

"""``modality``: the program-or-thought classifier, fitted on calibration pools, judged leave one family out.

From every calibration problem drawn both ways (chains of thought and programs), the better
modality is labelled per problem and a logistic regression over the prompt's MiniLM embedding
(the gateway's encoder) is fitted to predict it (:mod:`evaluation.routing.modality`). It is
judged leave one family out: fitted without a family, it chooses the modality of that family's
problems, and the choice is compared per family with the task-type rules' (a chain of thought
for ``open``, a program elsewhere) and with the base rate; the threshold at which an ``open``
prompt switches to a program is fitted on those left-out probabilities, and the gate decides
whether the gateway serves the switch. The classifier fitted on every family is also applied to
the development split's pools. Writes the gateway's model file (``services/gateway/routing/modality.<model>.json``,
``TTC_GATEWAY_MODALITY_MODELS``) and the raw figures (``docs/data/calibration/modality/``); prints
the per-family table. Embedding the prompts is the only compute (under a minute on two cores);
no model runs.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from calibration.lib.paths import DATA, DEFAULT_MODEL, DEFAULT_POOLS, ROOT, relative_to_root, safe_name
from evaluation.pools.provenance import load_average, provenance
from evaluation.pools.store import iter_chunks, read_pools
from evaluation.problems.datasets import DEVELOPMENT_KEY
from evaluation.routing.embeddings import embed
from evaluation.routing.fit_provenance import pools_provenance
from evaluation.routing.modality import (
    L2,
    Logistic,
    applied_report,
    base_rate,
    fit_problems,
    lofo_report,
    modality_problems,
)
from services.gateway.modality import DEFAULT_EFFORTS, FEATURES, ModalityModel

NAME = "modality"
HELP = "fit the program-or-thought classifier, judge it leave one family out, write modality.<model>.json"
MODEL_DIR = ROOT / "services" / "gateway" / "routing"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=DEFAULT_MODEL, help="the pools' model (folder under the pools root)")
    p.add_argument("--pools", type=Path, default=None, help="pool folder (default docs/data/calibration/pools/<model>)")
    p.add_argument("--out", type=Path, default=DATA / "modality", help="folder of the raw JSON")
    p.add_argument("--model-file", type=Path, default=None,
                   help="the gateway's file (default: modality.<model>.json beside the routing tables)")  # fmt: skip
    p.add_argument("--no-model-file", action="store_true", help="write the raw figures only")
    p.add_argument("--measure", choices=["mean", "greedy"], default="mean",
                   help="a modality's accuracy on a problem: its candidates' mean correctness or greedy's")  # fmt: skip
    p.add_argument("--l2", type=float, default=L2, help="the logistic regression's L2 penalty (standardized features)")
    p.add_argument("--seed", type=int, default=0, help="the bootstrap intervals' seed")


def run(a: argparse.Namespace) -> int:
    pools_dir = a.pools or DEFAULT_POOLS / a.model
    started = provenance(a.model)
    calibration = read_pools(pools_dir, "calibration")
    if not calibration:
        print(f"error: no calibration pools in {pools_dir}")
        return 1
    t0 = time.monotonic()
    problems = modality_problems(calibration, embed, a.measure)
    development = modality_problems(read_pools(pools_dir, DEVELOPMENT_KEY), embed, a.measure)
    embed_s = time.monotonic() - t0
    judged = lofo_report(problems, a.l2, a.seed)
    model = fit_problems(problems, a.l2)
    applied = applied_report(model, base_rate(problems), judged["threshold"], development, a.seed)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    raw_path = a.out / f"modality-{safe_name(a.model)}-{a.measure}-{stamp}.json"
    fit = {"measure": a.measure, "l2": a.l2, "problems": len(problems), "development_problems": len(development),
           "families": sorted({p.family for p in problems}), "embedding_seconds": round(embed_s, 1),
           "pools": pools_provenance(relative_to_root(pools_dir), list(iter_chunks(pools_dir, "calibration")),
                                     calibration)}  # fmt: skip
    body = {
        "provenance": started | {"load_average_end": load_average()},
        "fit": fit,
        "model": {"bias": model.bias, "weights": model.weights.tolist(), "base_rate": base_rate(problems)},
        "lofo": judged,
        "development": applied,
    }
    a.out.mkdir(parents=True, exist_ok=True)
    raw_path.write_text(json.dumps(body, indent=1) + "\n")
    print(family_table(judged, applied))
    print(f"\n{'switched ON' if judged['switched_on'] else 'switched OFF'}: {judged['why']}")
    print(f"wrote {relative_to_root(raw_path)}")
    if not a.no_model_file:
        path = a.model_file or MODEL_DIR / f"modality.{safe_name(a.model)}.json"
        document = model_document(a, model, judged, applied, started | {"report": relative_to_root(raw_path)})
        ModalityModel.model_validate(document)  # what the gateway will read, checked before it is written
        path.write_text(json.dumps(document, indent=1) + "\n")
        print(f"wrote {relative_to_root(path)}")
    return 0


def model_document(
    a: argparse.Namespace, model: Logistic, judged: Mapping[str, Any], applied: Mapping[str, Any],
    started: Mapping[str, Any],
) -> dict[str, Any]:  # fmt: skip
    """The gateway's model file: the weights, the threshold, whether the gate switched it on,
    where it came from, and the figures that decided it."""
    problems = judged["pooled"]["problems"]
    provenance_keys = ("model", "model_sha256", "git_describe", "started_at", "report")
    fit = {"pools": relative_to_root(a.pools or DEFAULT_POOLS / a.model), "split": "calibration",
           "measure": a.measure, "l2": a.l2, "problems": problems}  # fmt: skip
    return {
        "version": 1,
        "description": f"P(a program answers better than a chain of thought) from the prompt's embedding, fitted on "
        f"{problems} calibration problems of {a.model} ({a.measure} correctness); where enabled, served at effort "
        "minimal and low for prompts the task-type rules call open.",
        "enabled": judged["switched_on"],
        "efforts": list(DEFAULT_EFFORTS),
        "features": FEATURES,
        "weights": [round(w, 8) for w in model.weights.tolist()],
        "bias": round(model.bias, 8),
        "threshold": judged["threshold"] if judged["threshold"] is not None else 1.0,
        "provenance": {k: started[k] for k in provenance_keys} | fit,
        "lofo": model_summary(judged, applied),
    }


def _brief(c: Mapping[str, Any]) -> dict[str, Any]:
    """A comparison as the model file carries it: counts, and fractions to four places."""
    counts = {k: c[k] for k in ("problems", "wins", "losses")}
    fractions = {k: None if c[k] is None else round(c[k], 4) for k in ("accuracy", "against", "difference")}
    return counts | fractions | {"interval": [round(x, 4) for x in c["interval"]]}


def model_summary(judged: Mapping[str, Any], applied: Mapping[str, Any]) -> dict[str, Any]:
    """The figures the model file carries: the gate's verdict and the pooled and per-family comparisons."""
    pooled = judged["pooled"]
    development = applied["pooled"]
    return {
        "switched_on": judged["switched_on"],
        "why": judged["why"],
        "threshold": judged["threshold"],
        "served_vs_rule_open": _brief(pooled["served_vs_rule_open"]),
        "classifier_vs_rule": _brief(pooled["classifier_vs_rule"]),
        "classifier_vs_base_rate": _brief(pooled["classifier_vs_base_rate"]),
        "per_family_classifier_vs_rule": {f: _brief(s["classifier_vs_rule"]) for f, s in judged["per_family"].items()},
        "development_served_vs_rule_open": _brief(development["served_vs_rule_open"]) if development else None,
    }


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _diff(c: Mapping[str, Any]) -> str:
    if not c["problems"]:
        return "-"
    low, high = c["interval"]
    return f"{100 * c['difference']:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}] ({c['wins']}/{c['losses']})"


def family_table(judged: Mapping[str, Any], applied: Mapping[str, Any]) -> str:
    """Per left-out family and pooled: the rule's accuracy, the classifier's and the base rate's,
    their paired differences (wins/losses), and the served switch on ``open`` prompts."""
    lines = ["| left out | problems (open) | rule % | classifier % | classifier - rule, points [95% CI] (wins/losses) "
             "| classifier - base rate | served - rule on open |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    rows = [*judged["per_family"].items(), ("all (LOFO)", judged["pooled"])]
    if applied["pooled"] is not None:
        rows.append(("development pools", applied["pooled"]))
    for name, s in rows:
        c = s["classifier_vs_rule"]
        figures = (_pct(c["against"]), _pct(c["accuracy"]), _diff(c), _diff(s["classifier_vs_base_rate"]),
                   _diff(s["served_vs_rule_open"]))  # fmt: skip
        lines.append(f"| {name} | {s['problems']} ({s['open']}) | " + " | ".join(figures) + " |")
    return "\n".join(lines)

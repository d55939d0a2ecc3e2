"""``calibrate`` (``make calibrate``): a routing table for your own model, in one command.

Draws calibration pools on the running stack's policy service (any engine behind it: llama.cpp,
vLLM, a remote OpenAI-compatible API) and sandbox, for at most ``--hours`` of wall clock (the
chunk in flight when time is up is dropped; complete chunks are kept and the next run resumes
after them), then prices every configuration offline from every pool drawn so far, fits the
routes (:func:`calibration.lib.fit.fit_pools`, :mod:`evaluation.routing.route_fit`) and writes
``routing.<model>.json`` (the gateway loads it per model:
``TTC_GATEWAY_ROUTING_TABLES=<model>=<path>``), the per-problem predictions beside it, and
prints the ladder card the gateway will serve: per task type and effort the configuration, its
expected accuracy with a 95% interval, tokens and p50 latency. ``--no-draw`` only refits from
the pools already drawn (``make routing-table``).

Without ``--policy-target`` the drawer starts its own policy service on ``--model`` (a registry
name or a GGUF path) and takes the shared model lock per chunk; with a target it draws on that
engine and takes no lock unless ``--lock`` is given.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from calibration.lib.drawer import DrawSettings
from calibration.lib.fit import fit_pools
from calibration.lib.paths import DATA, safe_name
from calibration.lib.pool_run import PoolRun, StaleSettings, data_provenance
from evaluation.problems.datasets import DEVELOPMENT_KEY, Problem
from evaluation.problems.problemset import FAMILIES, TASK_KINDS, build_problem_set, check_disjoint
from evaluation.routing.route_fit import Fit
from services.gateway.ladder_card import ladder_card, render_card
from services.gateway.model_tables import load_table_file

NAME = "calibrate"
HELP = "draw within a time limit, then write routing.<model>.json (make calibrate, make routing-table)"
# Small enough that 0.2 h on SmolLM2-135M on two cores draws a usable table: one or two
# problems of every family (the set interleaves families, so any prefix covers them all).
DEFAULT_PER_FAMILY = 2
DEFAULT_K = 4


def chosen_families(families: str, datasets: str) -> list[str]:
    """Families named directly or by task kind (``--families arithmetic,letter_counting``), plus
    data sets by name (each family is drawn from the data set of its name); all when neither."""
    known = [f.name for f in FAMILIES]
    out: list[str] = []
    for name in [n.strip() for n in f"{families},{datasets}".split(",") if n.strip()]:
        if name in TASK_KINDS:
            out += [f.name for f in FAMILIES if f.kind == name]
        elif name in known:
            out.append(name)
        else:
            raise SystemExit(f"error: unknown family, task kind or data set {name!r}; families: {', '.join(known)}; "
                             f"task kinds: {', '.join(TASK_KINDS)}")  # fmt: skip
    return list(dict.fromkeys(out)) or known


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="the served model (registry name, GGUF path or the engine's id)")
    p.add_argument("--policy-target", default="", help="host:port of a running policy service (default: start one)")
    p.add_argument("--sandbox-target", default="", help="host:port of a running sandbox service (default: start one)")
    p.add_argument("--hours", type=float, default=2.0, help="wall-clock limit of the draw (0: draw everything)")
    p.add_argument("--families", default="", help="families or task kinds, comma-separated (default: all)")
    p.add_argument("--datasets", default="", help="data sets by name, comma-separated (added to --families)")
    p.add_argument("--per-family", type=int, default=DEFAULT_PER_FAMILY, help="calibration problems per family")
    p.add_argument("--seed", type=int, default=0, help="data and sampling seed")
    p.add_argument("--k", type=int, default=DEFAULT_K, help="sampled candidates per kind (plus one greedy)")
    p.add_argument("--temperature", type=float, default=DrawSettings.temperature)
    p.add_argument("--cot-max-tokens", type=int, default=DrawSettings.cot_max_tokens)
    p.add_argument("--code-max-tokens", type=int, default=DrawSettings.code_max_tokens)
    p.add_argument("--program-max-tokens", type=int, default=DrawSettings.program_max_tokens,
                   help="per program (default: the strategy's own cap; lower only for a smoke run)")  # fmt: skip
    p.add_argument(
        "--out", type=Path, default=None, help="folder of the table and pools (default docs/data/calibration/<model>)"
    )
    p.add_argument("--pools", type=Path, default=None, help="pool folder (default <out>/pools)")
    p.add_argument("--table", type=Path, default=None,
                   help="the table's path (default <out>/routing.<model>.json; predictions stay in <out>)")  # fmt: skip
    p.add_argument("--lock", action=argparse.BooleanOptionalAction, default=None,
                   help="take the model lock per chunk (default: when the drawer starts the policy)")  # fmt: skip
    p.add_argument("--estimator", choices=["embedding", "none"], default="embedding",
                   help="difficulty estimator of the table (embedding: the gateway's zero-token ridge)")  # fmt: skip
    p.add_argument("--sequential", action="store_true",
                   help="make a problem's calls one after another (no overlap, no latency probe)")  # fmt: skip
    p.add_argument("--confidence", type=float, default=0.9, help="early-stopping confidence of the priced votes")
    p.add_argument("--limit", type=int, default=64, help="subsets replayed per problem and configuration")
    p.add_argument("--no-draw", action="store_true", help="only fit the table from the pools already drawn")
    p.add_argument("--large-pools", type=Path, default=None,
                   help="a larger model's pool folder: cascades onto it compete in the fit, and the table "
                        "(default <out>/routing.<model>+<large>.json) is for a stack serving it as the escalation "
                        "deployment")  # fmt: skip


def draw(a: argparse.Namespace, pools_dir: Path, families: list[str]) -> int:
    """Draw the calibration split into ``pools_dir`` within the time limit; problems drawn."""
    problems: list[Problem] = build_problem_set("calibration", per_family=a.per_family, seed=a.seed, families=families)
    development = build_problem_set(DEVELOPMENT_KEY, per_family=a.per_family, seed=a.seed, families=families)
    check_disjoint(problems, development)
    settings = DrawSettings(k=a.k, temperature=a.temperature, cot_max_tokens=a.cot_max_tokens,
                            code_max_tokens=a.code_max_tokens, program_max_tokens=a.program_max_tokens,
                            seed=a.seed)  # fmt: skip
    run = PoolRun(
        model=a.model, split="calibration", problems=problems, directory=pools_dir, settings=settings,
        data=data_provenance("calibration", a.seed, a.per_family, families), chunk_size=1, hours=a.hours,
        policy_target=a.policy_target, sandbox_target=a.sandbox_target,
        lock=a.lock if a.lock is not None else not a.policy_target, stop_at_deadline=True,
        overlap=not a.sequential,
    )  # fmt: skip
    return asyncio.run(run.run())


def fit_table(a: argparse.Namespace, pools_dir: Path) -> Fit:
    """Price and fit on every calibration pool in ``pools_dir``."""
    return fit_pools(pools_dir, a.model, estimator=a.estimator, confidence=a.confidence, limit=a.limit,
                     seed=a.seed, large_pools_dir=a.large_pools).fit  # fmt: skip


def run(a: argparse.Namespace) -> int:
    out = a.out or DATA / safe_name(a.model)
    pools_dir = a.pools or out / "pools"
    families = chosen_families(a.families, a.datasets)
    if not a.no_draw:
        try:
            drawn = draw(a, pools_dir, families)
        except StaleSettings as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        print(f"drew {drawn} problem(s) into {pools_dir}")
    result = fit_table(a, pools_dir)
    out.mkdir(parents=True, exist_ok=True)
    name = safe_name(a.model) + (f"+{safe_name(a.large_pools.name)}" if a.large_pools else "")
    table_path = a.table or out / f"routing.{name}.json"
    table_path.parent.mkdir(parents=True, exist_ok=True)
    table_path.write_text(json.dumps(result.table, indent=1) + "\n")
    predictions = out / f"routing.{name}.predictions.json"
    predictions.write_text(json.dumps({"provenance": result.table["provenance"], "problems": result.predictions},
                                      indent=1) + "\n")  # fmt: skip
    try:
        source = load_table_file(table_path, what=a.model)
    except ValueError as err:
        print(f"error: {table_path} does not validate as a routing table: {err}", file=sys.stderr)
        return 1
    print(render_card(ladder_card(a.model, source, own=True)))  # the card the gateway will serve
    print(f"\nwrote {table_path} ({result.table['provenance']['problems']} problems) and {predictions}")
    print(f"serve it: TTC_GATEWAY_ROUTING_TABLES={a.model}={table_path}")
    return 0

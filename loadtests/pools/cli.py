"""``python -m loadtests.pools {problems,draw,status,rescore,table,calibrate,validate,live,heldout,routed,escalation}``.

``problems`` lists the problem set per split, family and task kind and checks the splits are
disjoint; ``draw`` draws pools through the real policy and sandbox services, in resumable
chunks under ``docs/data/calibration/pools/<model>/`` (each under the shared model lock);
``status`` counts what is drawn (cut share per kind, stale chunks); ``rescore`` re-checks the
stored answers with the current checker; ``table`` prices every configuration offline from the
pools and prints accuracy with 95% bootstrap intervals, generated and prompt tokens and the
latency estimate, per task kind and overall; ``calibrate`` draws within a time limit on a
running policy and writes ``routing.<model>.json`` (:mod:`loadtests.pools.calibrate`,
``make calibrate``); ``validate`` runs priced configurations live through the gateway and
reports whether the pools' estimate agrees (:mod:`loadtests.pools.validate`); ``live`` runs the
sequential and tree strategies live on a stratified calibration subset (:mod:`loadtests.pools.live`); ``heldout``
fits the routing as ``calibrate`` does and scores the ladder on the held-out pools, with the
Must-show checks (:mod:`loadtests.pools.heldout`); ``routed`` measures that ladder through
the gateway, one unpinned request per group of efforts that route alike
(:mod:`loadtests.pools.routed`); ``escalation`` prices the small model, the large one and the
cascade on the problems drawn for both (:mod:`loadtests.pools.escalation`).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import signal
import sys
from pathlib import Path
from typing import Any

from evaluation.datasets import Split
from evaluation.live_configs import live_table
from evaluation.pools import DRAW_KINDS, iter_chunks, read_pools
from evaluation.pricing import Pricer, StopRule, stop_rule
from evaluation.pricing_table import (
    Row,
    cascade,
    default_configs,
    fit_latency,
    judges_in,
    price_all,
    summarize,
    table,
)
from evaluation.problemset import DEFAULT_PER_FAMILY, FAMILIES, build_problem_set, check_disjoint, family_of
from evaluation.provenance import provenance
from loadtests.pools import calibrate, escalation, heldout, live, routed, validate
from loadtests.pools.draw import DrawSettings, program_prompt_changed, program_version
from loadtests.pools.run import DEFAULT_POOLS, PoolRun, StaleSettings, data_provenance

DEFAULT_MODEL = "qwen2.5-coder-0.5b"


def _set_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--per-family", type=int, default=DEFAULT_PER_FAMILY, help="problems per family and split")
    p.add_argument("--seed", type=int, default=0, help="data seed")
    p.add_argument("--families", default="", help="comma-separated subset (default: all)")


def _families(a: argparse.Namespace) -> list[str]:
    return [f for f in a.families.split(",") if f] or [f.name for f in FAMILIES]


def cmd_problems(a: argparse.Namespace) -> int:
    sets = {s: build_problem_set(s, per_family=a.per_family, seed=a.seed, families=_families(a))
            for s in ("calibration", "heldout")}  # fmt: skip
    check_disjoint(sets["calibration"], sets["heldout"])
    for split, problems in sets.items():
        by = collections.Counter((family_of(p).kind, p.dataset) for p in problems)
        kinds = sorted({k for k, _ in by})
        print(f"{split}: {len(problems)} problems, {len(by)} families, {len(kinds)} task kinds")
        for (kind, family), count in sorted(by.items()):
            print(f"  {kind:<11} {family:<20} {count}")
    print("disjoint: no shared id or question; every problem on its hashed side")
    return 0


def cmd_draw(a: argparse.Namespace) -> int:
    split: Split = a.split
    problems = build_problem_set(split, per_family=a.per_family, seed=a.seed, families=_families(a))
    other = build_problem_set("heldout" if split == "calibration" else "calibration", per_family=a.per_family,
                              seed=a.seed, families=_families(a))  # fmt: skip
    check_disjoint(*((problems, other) if split == "calibration" else (other, problems)))
    if a.max_problems:
        problems = problems[: a.max_problems]
    settings = DrawSettings(k=a.k, temperature=a.temperature, cot_max_tokens=a.cot_max_tokens,
                            code_max_tokens=a.code_max_tokens, seed=a.seed)  # fmt: skip
    run = PoolRun(
        model=a.model, split=split, problems=problems, directory=a.out or DEFAULT_POOLS / a.model,
        settings=settings, data=data_provenance(split, a.seed, a.per_family, _families(a)),
        chunk_size=a.chunk_size, redraw_stale=a.redraw_stale, hours=a.hours,
        policy_target=a.policy_target, sandbox_target=a.sandbox_target, overlap=not a.sequential,
    )  # fmt: skip
    try:
        asyncio.run(run.run())
    except StaleSettings as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


def cmd_status(a: argparse.Namespace) -> int:
    directory = a.out or DEFAULT_POOLS / a.model
    chunks = list(iter_chunks(directory))
    version, settings = program_version(), DrawSettings(k=a.k, seed=a.seed).as_dict()
    pools = read_pools(directory)
    print(f"{directory}: {len(chunks)} chunks, {len(pools)} problems; program version now {version}")
    stale = [c.path.name for c in chunks if c.header.get("program_version") != version]
    print(f"chunks of another program version: {len(stale)} {stale[:5]}")
    other = [c.path.name for c in chunks if c.header.get("settings") != settings]
    print(f"chunks with other draw settings than k={a.k} defaults: {len(other)}")
    changed = [p.id for p in pools if program_prompt_changed(p)]
    print(f"problems whose program prompt changed since drawn (a draw redraws them): {len(changed)} {changed[:5]}")
    for split in sorted({p.split for p in pools}):
        mine = [p for p in pools if p.split == split]
        fams = collections.Counter(p.family for p in mine)
        print(f"{split}: {len(mine)} problems: " + ", ".join(f"{f} {n}" for f, n in sorted(fams.items())))
        for kind in DRAW_KINDS:
            cands = [c for p in mine if kind in p.draws for c in p.draws[kind].candidates]
            if cands:
                cut = sum(c.cut for c in cands)
                right = sum(bool(c.correct) for c in cands)
                print(f"  {kind:<8} {len(cands)} candidates, cut {cut} ({cut / len(cands):.1%}), "
                      f"correct {right / len(cands):.1%}")  # fmt: skip
    return 0


def _print_rows(rows: list[Row], keep: set[str] | None) -> None:
    print(
        "| group | configuration | problems | accuracy | 95% CI | generated tok | prompt tok | latency s (mean / p50) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if keep is not None and r.config not in keep:
            continue
        esc = f" (escalated {r.escalated:.0%})" if r.escalated else ""
        print(f"| {r.group} | `{r.config}`{esc} | {r.problems} | {r.accuracy:.3f} | [{r.low:.3f}, {r.high:.3f}] | "
              f"{r.generated:.0f} | {r.prompt:.0f} | {r.latency_s:.1f} / {r.latency_p50_s:.1f} |")  # fmt: skip


def cmd_table(a: argparse.Namespace) -> int:
    pools = [p for p in read_pools(a.out or DEFAULT_POOLS / a.model) if a.split in ("all", p.split)]
    if not pools:
        print("no pools drawn yet", file=sys.stderr)
        return 1
    k = min(len(d.sampled) for p in pools for d in p.draws.values())
    pricer = Pricer(fit_latency(pools), stop_rule(a.confidence), limit=a.limit, seed=a.seed)
    configs = default_configs(k, judges_in(pools))
    priced = price_all(pricer, pools, configs)
    rows = table(pools, priced, a.seed)
    live_dir = a.live or live.DEFAULT_LIVE / a.model
    measured = live.live_set(live_dir) if a.split == "calibration" and live_dir.is_dir() else None
    if measured is not None:  # sequential and tree strategies, beside the priced ones on their subset
        rows += live_table(pools, priced, measured.estimates, a.seed)
    if a.large_model:
        rows += _cascade_rows(a, pools, pricer, pricer.stop)
    keep = {c for c in a.configs.split(",") if c} or None
    print(f"{len(pools)} problems ({a.split}), k={k}; latency model {pricer.latency}")
    _print_rows(rows, keep)
    if a.json:
        per_problem = {name: {pid: e.__dict__ for pid, e in est.items()} for name, est in priced.items()}
        # The pools' own chunk headers name the code and seeds that drew them; this names the pricer.
        meta = provenance(a.model, split=a.split, problems=len(pools), k=k, pools=str(a.out or DEFAULT_POOLS / a.model))
        body = {"provenance": meta, "rows": [r.as_dict() for r in rows], "per_problem": per_problem}
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(body, indent=1))
    return 0


def _cascade_rows(a: argparse.Namespace, pools: list[Any], pricer: Pricer, stop: StopRule | None) -> list[Row]:
    large = {p.id: p for p in read_pools(DEFAULT_POOLS / a.large_model)}
    both = [p for p in pools if p.id in large]
    if not both:
        return []
    large_pricer = Pricer(fit_latency(list(large.values())), stop, limit=a.limit, seed=a.seed)
    configs = {c.name: c for c in default_configs(8)}
    rows = []
    for small_name, large_name in (("pot@1", "pot@1"), ("pot@4:es", "pot@1"), ("pot@4:es", "pot@4:es")):
        small_c, large_c = configs[small_name], configs[large_name]
        for group in [*dict.fromkeys(p.kind for p in both), "all"]:
            found = [cascade(pricer, large_pricer, p, large[p.id], small_c, large_c, a.threshold)
                     for p in both if group in ("all", p.kind)]  # fmt: skip
            est = [e for e in found if e is not None]
            if est:
                rows.append(summarize(group, f"cascade({small_name}->{a.large_model}:{large_name})", est, a.seed))
    return rows


def cmd_rescore(a: argparse.Namespace) -> int:
    from loadtests.pools.rescore import rescore

    changed = rescore(a.out or DEFAULT_POOLS / a.model)
    print(
        f"{sum(changed.values())} verdicts changed in {sum(1 for n in changed.values() if n)} of {len(changed)} chunks"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtests.pools", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("problems", help="the problem set per split; checks disjointness")
    _set_args(p)
    p = sub.add_parser("draw", help="draw pools through the policy and sandbox services (resumes)")
    _set_args(p)
    p.add_argument("--model", default=DEFAULT_MODEL)
    p.add_argument("--split", choices=["calibration", "heldout"], default="calibration")
    p.add_argument("--out", type=Path, default=None, help="pool folder (default docs/data/calibration/pools/<model>)")
    p.add_argument("--k", type=int, default=8, help="sampled candidates per kind (plus one greedy)")
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--cot-max-tokens", type=int, default=DrawSettings.cot_max_tokens)
    p.add_argument("--code-max-tokens", type=int, default=DrawSettings.code_max_tokens)
    p.add_argument("--chunk-size", type=int, default=5, help="problems per chunk file")
    p.add_argument("--max-problems", type=int, default=0, help="draw at most this many of the split (0: all)")
    p.add_argument("--hours", type=float, default=0.0, help="stop starting chunks after this long (0: no limit)")
    p.add_argument("--redraw-stale", action="store_true", help="re-draw chunks of another program version/settings")
    p.add_argument("--sequential", action="store_true",
                   help="make a chunk's calls one after another (no overlap, no latency probe: each call's own "
                        "wall time fits the latency model)")  # fmt: skip
    p.add_argument("--policy-target", default="", help="a running policy service (default: start one)")
    p.add_argument("--sandbox-target", default="", help="a running sandbox service (default: start one)")
    calibrate.add_arguments(
        sub.add_parser("calibrate", help="draw within a time limit, then write routing.<model>.json")
    )
    validate.add_arguments(
        sub.add_parser("validate", help="run priced configurations live through the gateway; compare (resumes)")
    )
    live.add_arguments(
        sub.add_parser("live", help="run sequential and tree strategies live on a stratified calibration subset")
    )
    heldout.add_arguments(
        sub.add_parser("heldout", help="fit routing on calibration pools, score the ladder on held-out pools")
    )
    routed.add_arguments(
        sub.add_parser("routed", help="the held-out ladder through the gateway, routed by effort (resumes)")
    )
    escalation.add_arguments(
        sub.add_parser("escalation", help="small model, large model and the cascade, priced from both models' pools")
    )
    for name in ("status", "rescore", "table"):
        p = sub.add_parser(name)
        p.add_argument("--model", default=DEFAULT_MODEL)
        p.add_argument("--out", type=Path, default=None)
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--k", type=int, default=8)
    p.add_argument("--split", choices=["calibration", "heldout", "all"], default="calibration")
    p.add_argument("--limit", type=int, default=128, help="subsets replayed per problem before sampling them")
    p.add_argument("--confidence", type=float, default=0.9, help="early-stopping confidence")
    p.add_argument("--configs", default="", help="only these configurations (comma-separated)")
    p.add_argument("--large-model", default="", help="price the cascade onto this model's pools")
    p.add_argument("--threshold", type=float, default=0.75, help="cascade: escalate below this vote share")
    p.add_argument("--json", type=Path, default=None, help="write rows and per-problem estimates here")
    p.add_argument("--live", type=Path, default=None,
                   help="live records of tree strategies (default docs/data/calibration/live/<model>)")  # fmt: skip
    a = parser.parse_args(argv)
    # A SIGTERM (kill, timeout) unwinds through ``finally`` so the policy and sandbox a draw started stop too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    handlers = {
        "problems": cmd_problems, "draw": cmd_draw, "status": cmd_status, "rescore": cmd_rescore, "table": cmd_table,
        "calibrate": calibrate.run, "validate": validate.run, "live": live.run,
        "heldout": heldout.run, "routed": routed.run, "escalation": escalation.run,
    }  # fmt: skip
    return handlers[a.command](a)

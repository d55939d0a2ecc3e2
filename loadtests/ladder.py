"""``python -m loadtests ladder``: the effort ladder of a routing table on a held-out run.

Every held-out problem is routed exactly as the gateway routes it: the table's zero-token
difficulty estimator (the gateway's own ``EmbeddingEstimator``) and task-type classifier pick
the route for each effort; the route names a configuration that the held-out run measured,
pinned, on that very problem, and that measurement is the effort's outcome. (Routing with
a zero-token estimator is deterministic, so this is what a routed request would have run; a
probe estimator would need live routed requests instead.) The output is a Markdown sheet and
JSON: per effort and per fixed configuration, accuracy with a 95% interval, generated and
prompt tokens, p50 latency and the ledger, overall and per group of data sets.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from evaluation.datasets import Problem
from evaluation.ladder import LadderRow, effort_rows, ladder_row, monotone
from evaluation.provenance import provenance
from evaluation.records import RequestRecord, iter_records, read_problems
from loadtests.grid import EFFORTS, parse_cell
from services.common.difficulty_features import estimation_text
from services.common.task_type import classify_task
from services.gateway.difficulty import load_encoder, make_estimator
from services.gateway.protocol import Effort
from services.gateway.routing import Route, RoutingTable, load_routing_table

ARITHMETIC = ("chain_sum", "basic_arithmetic", "products")


def route_label(route: Route, labels: Sequence[str]) -> str:
    """The measured configuration label a route runs (same strategy, n, verifier and params)."""
    for label in labels:
        cell = parse_cell(label)
        if (
            cell.strategy == route.strategy
            and (cell.n or 1) == route.n
            and (cell.verifier or None) == route.verifier
            and dict(cell.params) == dict(route.params)
        ):
            return label
    return f"{route.strategy}:n={route.n}:" + ":".join(f"{k}={v}" for k, v in sorted(route.params.items()))


def route_questions(
    table: RoutingTable, questions: Mapping[str, str], efforts: Sequence[str]
) -> dict[str, dict[str, Route]]:
    """``effort → problem id → route`` for each question, as the gateway routes its prompt: the
    gateway's task-type classifier and the table's zero-token estimator and bins. Shared by this
    ladder (live records) and ``evaluation.heldout_ladder`` (held-out pools)."""
    estimator = make_estimator(table.estimator, policy=None, timeout_s=0.0, encoder=load_encoder(table.estimator))  # type: ignore[arg-type]
    if estimator is not None and table.estimator.kind != "embedding":
        raise ValueError("ladder needs a zero-token estimator (kind 'embedding' or 'none'): a probe must run live")
    chosen: dict[str, dict[str, Route]] = {e: {} for e in efforts}
    for pid, question in questions.items():
        text = estimation_text([("user", question)], "")
        task = classify_task(text)
        bin_name = None
        if estimator is not None:
            bin_name = table.bin_of(estimator.difficulty(text))  # type: ignore[attr-defined]
        for effort in efforts:
            chosen[effort][pid] = table.route(cast(Effort, effort), bin_name, task)
    return chosen


def route_problems(
    table: RoutingTable, problems: Sequence[Problem], labels: Sequence[str], efforts: Sequence[str]
) -> dict[str, dict[str, str]]:
    """``effort → problem id → configuration label``, as the gateway would route."""
    routes = route_questions(table, {p.id: p.question for p in problems}, efforts)
    return {effort: {pid: route_label(r, labels) for pid, r in per.items()} for effort, per in routes.items()}


def _fmt(row: LadderRow) -> str:
    low, high = row.ci95
    led = row.ledger
    ledger = (
        f"{led.get('pass_at_1', 0):.2f} / {led.get('pass_at_k', 0):.2f} (k={led.get('k', 0)}) / "
        f"{led.get('maj_at_k', 0):.2f} / {led.get('selected', 0):.2f} / {led.get('coverage', 0):.2f}"
        if led
        else "-"
    )
    configs = ", ".join(f"{c} x{n}" for c, n in sorted(row.configs.items(), key=lambda kv: -kv[1]))
    p50 = f"{row.latency_p50_s:.1f}" if row.latency_p50_s is not None else "-"
    return (
        f"| {row.name} | {row.correct}/{row.problems} = {100 * row.accuracy:.0f}% | "
        f"[{100 * low:.0f}, {100 * high:.0f}] | {row.generated_tokens:.0f} | {row.prompt_tokens:.0f} | {p50} | "
        f"{ledger} | {row.failures} | {configs} |"
    )


HEADER = (
    "| effort / configuration | accuracy | 95% CI | generated tok | prompt tok | p50 s | "
    "ledger: pass@1 / pass@k / maj@k / selected / coverage | infra failures | configurations |\n"
    "|---|---|---|---|---|---|---|---|---|"
)


def sheet(
    table: RoutingTable, problems: dict[str, Problem], records: Sequence[RequestRecord], efforts: Sequence[str]
) -> dict[str, Any]:
    labels = sorted({r.strategy_pinned for r in records if r.strategy_pinned})
    measured = {(r.problem_id, r.strategy_pinned): r for r in records if r.strategy_pinned and r.sample == 0}
    groups = {
        "all": list(problems.values()),
        "arithmetic (" + ", ".join(ARITHMETIC) + ")": [p for p in problems.values() if p.dataset in ARITHMETIC],
        "word problems (other data sets)": [p for p in problems.values() if p.dataset not in ARITHMETIC],
    }
    out: dict[str, Any] = {"groups": {}}
    for name, members in groups.items():
        if not members:
            continue
        ids = {p.id for p in members}
        chosen = route_problems(table, members, labels, efforts)
        rows, missing = effort_rows(chosen, measured)
        fixed = [ladder_row(label, [r for (pid, lab), r in measured.items() if lab == label and pid in ids])
                 for label in labels]  # fmt: skip
        out["groups"][name] = {
            "problems": len(members),
            "efforts": [r.as_dict() for r in rows],
            "fixed": [r.as_dict() for r in fixed],
            "monotone": monotone(rows),
            "unmeasured_routes": missing,
            "_rows": rows,
            "_fixed": fixed,
        }
    return out


def markdown(result: dict[str, Any], table_path: Path, run: Path) -> str:
    lines = [f"Routing table `{table_path}`, held-out run `{run}`.", ""]
    for name, group in result["groups"].items():
        lines += [f"### {name}: {group['problems']} problems", "", HEADER]
        lines += [_fmt(r) for r in group["_rows"]]
        lines += ["| *fixed configurations* | | | | | | | | |"]
        lines += [_fmt(r) for r in group["_fixed"]]
        verdict = "non-decreasing" if group["monotone"] else "NOT monotone"
        lines += ["", f"Point accuracy from the first to the last effort: {verdict}."]
        if group["unmeasured_routes"]:
            lines += [f"Routes to unmeasured configurations (left out): {len(group['unmeasured_routes'])}."]
        lines.append("")
    return "\n".join(lines)


def cmd_ladder(a: argparse.Namespace) -> int:
    efforts = [e for e in a.efforts.split(",") if e]
    unknown = [e for e in efforts if e not in EFFORTS]
    if unknown:
        raise ValueError(f"unknown efforts {unknown}; known: {', '.join(EFFORTS)}")
    table = load_routing_table(a.table)
    result = sheet(table, read_problems(a.heldout_run), list(iter_records(a.heldout_run)), efforts)
    text = markdown(result, a.table, a.heldout_run)
    print(text)
    if a.out is not None:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "ladder.md").write_text(text + "\n")
        clean = {k: {kk: vv for kk, vv in v.items() if not kk.startswith("_")} for k, v in result["groups"].items()}
        sheet_json = {
            "groups": clean,
            "heldout_run": str(a.heldout_run),
            "table": str(a.table),
            "provenance": provenance(),
        }
        (a.out / "ladder.json").write_text(json.dumps(sheet_json, indent=2, default=str) + "\n")
    return 0


def add_ladder_parser(sub: Any) -> None:
    p = sub.add_parser("ladder", help="the effort ladder of a routing table on a held-out run (Markdown + JSON)")
    p.add_argument("heldout_run", type=Path)
    p.add_argument("--table", type=Path, required=True, help="the routing table to evaluate (routing.json)")
    p.add_argument("--efforts", default=",".join(EFFORTS))
    p.add_argument("--out", type=Path, default=None, help="write ladder.md and ladder.json here")
    p.set_defaults(func=cmd_ladder)

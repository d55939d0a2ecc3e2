"""``python -m loadtests {run,report,calibrate,compare,full}``.

``run`` drives the gateway over a grid and writes a run directory; ``report`` turns run
directories into tables, Pareto PNGs and a self-contained HTML page; ``calibrate`` fits the
difficulty estimator and writes a routing table; ``compare`` prints the change between two
runs; ``full`` does calibration run → calibrate → held-out run → report in one go (what
``make loadtest`` calls), starting the local stack when no gateway answers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from evaluation.datasets import Split, UnknownDataset, check_dataset_name, load_mix
from evaluation.records import read_records, read_run_meta
from evaluation.report import Pricing, build_rows, compare, totals
from evaluation.report_html import write_report
from evaluation.settings import EvaluationSettings
from loadtests.grid import GridError, build_grid, split_list
from loadtests.runner import PreflightError, RunConfig, run

DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"
DEFAULT_TABLE = Path("services/gateway/routing/routing.v1.json")


def _run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--base-url", default=DEFAULT_BASE_URL, help="gateway's OpenAI base URL")
    p.add_argument("--api-key", default="none")
    p.add_argument("--model", required=True, help="model name as the gateway lists it")
    p.add_argument("--datasets", default="chain_sum,basic_arithmetic,gsm_symbolic", help="comma-separated")
    p.add_argument("--problems", type=int, default=2, help="problems per data set and difficulty level")
    p.add_argument("--levels", default="1,2,3")
    p.add_argument("--split", choices=["calibration", "heldout", "all"], default="heldout")
    p.add_argument("--efforts", default="low,medium,high")
    p.add_argument("--strategies", default="auto", help="auto and/or name[:n=N][:budget=T][:verifier=V], comma-sep")
    p.add_argument("--samples", type=int, default=1, help="requests per problem and cell (different seeds)")
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--rate", type=float, default=None, help="open loop: Poisson arrivals per second")
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--max-tokens", type=int, default=256, help="answer tokens per candidate")
    p.add_argument("--no-stream", action="store_true", help="no streaming (no time to first token)")
    p.add_argument("--no-traces", action="store_true", help="do not fetch traces (no candidate pools)")
    p.add_argument("--timeout", type=float, default=600.0, help="per-request timeout in seconds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sandbox", default="127.0.0.1:50053", help="sandbox gRPC target for code problems")
    p.add_argument("--resume", action="store_true", help="skip requests already recorded in --out")
    p.add_argument("--out", type=Path, required=True, help="run directory")


def _pricing_args(p: argparse.ArgumentParser) -> None:
    s = EvaluationSettings()
    p.add_argument("--pricing", choices=["tokens", "gpu_hour"], default=s.pricing)
    p.add_argument("--price-prompt", type=float, default=s.price_per_mtok_prompt, help="USD per 1M prompt tokens")
    p.add_argument("--price-completion", type=float, default=s.price_per_mtok_completion, help="USD per 1M")
    p.add_argument("--price-gpu-hour", type=float, default=s.price_per_gpu_hour)


def _config(a: argparse.Namespace, out: Path, split: Split | None = None) -> tuple[RunConfig, list[Any], list[Any]]:
    cells = build_grid(split_list(a.efforts), split_list(a.strategies))
    datasets = split_list(a.datasets)
    if not datasets:
        raise UnknownDataset("datasets: no data set given")
    for name in datasets:
        check_dataset_name(name)
    levels = [int(x) for x in split_list(a.levels)]
    problems = load_mix(datasets, a.problems, split=split or a.split, seed=a.seed, levels=levels)
    config = RunConfig(
        base_url=a.base_url, model=a.model, out=out, api_key=a.api_key, concurrency=a.concurrency, rate=a.rate,
        samples=a.samples, temperature=a.temperature, max_tokens=a.max_tokens, stream=not a.no_stream,
        fetch_traces=not a.no_traces, request_timeout_s=a.timeout, seed=a.seed, resume=a.resume,
    )  # fmt: skip
    return config, cells, problems


def _runner(a: argparse.Namespace, problems: list[Any]) -> Any:
    if any(p.check == "code" for p in problems):
        from evaluation.checkers import sandbox_runner

        return sandbox_runner(a.sandbox)
    return None


def cmd_run(a: argparse.Namespace) -> int:
    config, cells, problems = _config(a, a.out)
    asyncio.run(run(config, cells, problems, _runner(a, problems)))
    print(f"records in {a.out}/records.jsonl; report with: python -m loadtests report {a.out}")
    return 0


def make_report(
    runs: list[Path], out: Path, a: argparse.Namespace, calibration: Path | None = None, title: str = ""
) -> Path:
    records = read_records(runs)
    meta = read_run_meta(runs[0])
    concurrency = int(meta.get("config", {}).get("concurrency", 1))
    pricing = Pricing(a.pricing, a.price_prompt, a.price_completion, a.price_gpu_hour, concurrency)
    rows = build_rows(records, pricing)
    notes = [
        f"model {meta.get('model', '?')}; data sets {', '.join(meta.get('datasets', []))}; levels "
        f"{meta.get('levels')}; temperature {meta.get('config', {}).get('temperature')}; max_tokens "
        f"{meta.get('config', {}).get('max_tokens')}; concurrency {concurrency}; pricing {pricing.mode}.",
        "selected = what the system returned; pass@1 / pass@k / maj@k / coverage come from the candidate pool "
        "(the trace's candidates, or a problem's samples); errors are excluded from accuracy and counted apart.",
        "tokens/req counts prompt + completion tokens, hidden reasoning and the difficulty probe included.",
    ]
    if not meta.get("finished", True):
        notes.append("this run was interrupted: the numbers cover only the requests it finished.")
    sections = []
    if calibration is not None and calibration.exists():
        from loadtests.calibrate import html_section

        sections.append(("Calibration and adaptive routing", html_section(json.loads(calibration.read_text()))))
    return write_report(
        out,
        title or f"ttc-serve cost vs accuracy: {meta.get('model', '')}",
        rows,
        totals(records),
        meta,
        notes,
        sections,
    )


def cmd_report(a: argparse.Namespace) -> int:
    out = a.out or a.runs[0] / "report"
    page = make_report(a.runs, out, a, a.calibration)
    print(f"report: {page}")
    return 0


def cmd_calibrate(a: argparse.Namespace) -> int:
    from loadtests.calibrate import calibrate

    result = calibrate(
        a.calibration_run, a.out, base_table=a.base_table, heldout_run=a.heldout_run,
        use_embeddings=not a.no_embeddings,
    )  # fmt: skip
    print(f"routing table: {a.out / 'routing.json'}")
    for kind, line in result.get("heldout", {}).get("verdict", {}).items():
        print(f"{kind}: {line}")
    return 0


def cmd_compare(a: argparse.Namespace) -> int:
    pricing = Pricing()
    base = build_rows(read_records([a.base]), pricing)
    new = build_rows(read_records([a.new]), pricing)
    diffs = compare(base, new)
    if not diffs:
        print("no (effort, strategy, level) rows in common")
        return 1
    print(f"{'effort':8} {'strategy':28} {'lvl':4} {'selected (old→new)':>22} {'tokens (old→new)':>20} {'p95 s':>16}")
    for d in diffs:
        s, t, l95 = d["selected"], d["mean_tokens"], d["latency_p95"]

        def f(v: Any, pct: bool = False) -> str:
            return "-" if v is None else (f"{100 * v:.1f}%" if pct else f"{v:.1f}")

        print(
            f"{d['effort']!s:8} {d['strategy']!s:28} {d['level']!s:4} {f(s[0], True):>10}→{f(s[1], True):<10} "  # type: ignore[index]
            f"{f(t[0]):>9}→{f(t[1]):<9} {f(l95[0]):>7}→{f(l95[1]):<7}"  # type: ignore[index]
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtests", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="drive the gateway over a grid and record every request")
    _run_args(p)
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("report", help="tables, Pareto PNGs and an HTML page from run directories")
    p.add_argument("runs", type=Path, nargs="+")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--calibration", type=Path, default=None, help="calibration.json to include")
    _pricing_args(p)
    p.set_defaults(func=cmd_report)
    p = sub.add_parser("calibrate", help="difficulty estimator + routing table from a calibration run")
    p.add_argument("calibration_run", type=Path)
    p.add_argument("--heldout-run", type=Path, default=None)
    p.add_argument("--base-table", type=Path, default=DEFAULT_TABLE)
    p.add_argument("--no-embeddings", action="store_true", help="probe agreement only (no MiniLM)")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(func=cmd_calibrate)
    p = sub.add_parser("compare", help="change per (effort, strategy, level) between two runs")
    p.add_argument("base", type=Path)
    p.add_argument("new", type=Path)
    p.set_defaults(func=cmd_compare)
    from loadtests.full import add_full_parser
    from loadtests.ladder import add_ladder_parser

    add_full_parser(sub, _run_args, _pricing_args)
    add_ladder_parser(sub)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (PreflightError, GridError, UnknownDataset, FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as err:
        print(f"\n{err or 'interrupted'}", file=sys.stderr)
        return 130

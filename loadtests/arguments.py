"""The flags a load-test run and its report share, and the run they describe.

``run`` and ``full`` send the same requests from the same flags; ``report`` and ``full`` price
them alike. One definition here, so the two commands cannot drift apart.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from evaluation.problems.checkers import CodeRunner, sandbox_runner
from evaluation.problems.datasets import (
    SPLIT_NAMES,
    Problem,
    Split,
    UnknownDataset,
    check_dataset_name,
    load_mix,
    split_key,
)
from evaluation.report.settings import EvaluationSettings
from loadtests.grid import Cell, build_grid, split_list
from loadtests.runner import RunConfig

DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"


def run_arguments(p: argparse.ArgumentParser) -> None:
    """What a load-test run sends: gateway, model, problems, grid, sampling, concurrency, output."""
    p.add_argument("--base-url", default=DEFAULT_BASE_URL, help="gateway's OpenAI base URL")
    p.add_argument("--api-key", default="none")
    p.add_argument("--model", required=True, help="model name as the gateway lists it")
    p.add_argument("--datasets", default="chain_sum,basic_arithmetic,gsm_symbolic", help="comma-separated")
    p.add_argument("--problems", type=int, default=2, help="problems per data set and difficulty level")
    p.add_argument("--levels", default="1,2,3")
    p.add_argument("--split", choices=list(SPLIT_NAMES), default="development")
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


def pricing_arguments(p: argparse.ArgumentParser) -> None:
    """How the report prices tokens and time (defaults from ``TTC_EVAL_*``)."""
    s = EvaluationSettings()
    p.add_argument("--pricing", choices=["tokens", "gpu_hour"], default=s.pricing)
    p.add_argument("--price-prompt", type=float, default=s.price_per_mtok_prompt, help="USD per 1M prompt tokens")
    p.add_argument("--price-completion", type=float, default=s.price_per_mtok_completion, help="USD per 1M")
    p.add_argument("--price-gpu-hour", type=float, default=s.price_per_gpu_hour)


def run_config(
    a: argparse.Namespace, out: Path, split: Split | None = None
) -> tuple[RunConfig, list[Cell], list[Problem]]:
    """The run's settings, its grid and its problems from the flags (``split`` overrides ``--split``)."""
    cells = build_grid(split_list(a.efforts), split_list(a.strategies))
    datasets = split_list(a.datasets)
    if not datasets:
        raise UnknownDataset("datasets: no data set given")
    for name in datasets:
        check_dataset_name(name)
    levels = [int(x) for x in split_list(a.levels)]
    problems = load_mix(datasets, a.problems, split=split or split_key(a.split), seed=a.seed, levels=levels)
    config = RunConfig(
        base_url=a.base_url, model=a.model, out=out, api_key=a.api_key, concurrency=a.concurrency, rate=a.rate,
        samples=a.samples, temperature=a.temperature, max_tokens=a.max_tokens, stream=not a.no_stream,
        fetch_traces=not a.no_traces, request_timeout_s=a.timeout, seed=a.seed, resume=a.resume,
    )  # fmt: skip
    return config, cells, problems


def code_runner(a: argparse.Namespace, problems: list[Problem]) -> CodeRunner | None:
    """The sandbox that checks code answers (``--sandbox``), when any problem is code."""
    if any(p.check == "code" for p in problems):
        return sandbox_runner(a.sandbox)
    return None

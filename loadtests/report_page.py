"""The cost-versus-accuracy report of load-test runs: tables, Pareto PNGs and one self-contained
HTML page (:mod:`evaluation.report.html`), with notes on what the run measured and how."""

from __future__ import annotations

import argparse
from pathlib import Path

from evaluation.report.html import write_report
from evaluation.report.records import read_records, read_run_meta
from evaluation.report.tables import Pricing, build_rows, totals


def make_report(runs: list[Path], out: Path, a: argparse.Namespace, title: str = "") -> Path:
    """The HTML page, tables and Pareto PNGs of ``runs`` under ``out``, priced as ``a`` says."""
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
    return write_report(
        out,
        title or f"ttc-serve cost vs accuracy: {meta.get('model', '')}",
        rows,
        totals(records),
        meta,
        notes,
    )

"""The development ladder written out: its Markdown tables and its raw JSON (pure).

Shared by the offline ladder on the development split's pools (``python -m calibration
development``) and the
ladder measured through the gateway (``python -m calibration routed``), so both print the same
rows: per effort the routed configuration's accuracy with its 95% interval, tokens, cost and p50
latency (:class:`~.ladder.Summary`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evaluation.heldout.checks import Check
from evaluation.heldout.ladder import BestFixed, Summary


def intended(chunks: Sequence[Any]) -> tuple[int | None, list[str]]:
    """The development split's intended size (per family x families, from the chunk headers'
    data provenance) and its families."""
    data = [c.header.get("data") or {} for c in chunks]
    sizes = {int(d.get("per_family", 0)) * len(d.get("families", [])) for d in data if d}
    families = sorted({f for d in data for f in d.get("families", [])})
    return (max(sizes) if sizes else None), families


def summary_row(r: Summary, extra: str = "") -> str:
    """One row of the ladder's Markdown table (accuracies in points)."""
    p50 = f"{r.p50_latency_s:.1f}" if r.p50_latency_s is not None else "-"
    unpriced = f" ({r.unpriced} unpriced)" if r.unpriced else ""
    return (f"| {r.name}{extra} | {r.problems}{unpriced} | {100 * r.accuracy:.1f} | "
            f"[{100 * r.interval[0]:.1f}, {100 * r.interval[1]:.1f}] | {r.generated_tokens:.0f} | "
            f"{r.prompt_tokens:.0f} | {r.cost:.0f} | {p50} |")  # fmt: skip


HEADER = ("| effort / configuration | problems | accuracy % | 95% CI | generated tok | prompt tok | cost | p50 s |\n"
          "|---|---|---|---|---|---|---|---|")  # fmt: skip


def markdown(groups: Mapping[str, Mapping[str, Any]], checks: Sequence[Check], head: Sequence[str]) -> str:
    """The checks, then per group the routed ladder, the best fixed configuration within each
    effort's budget and every fixed configuration."""
    lines = [*head, "", "## Must-show checks", "", *[c.line() for c in checks], ""]
    for name, g in groups.items():
        lines += [f"## {name}: {g['problems']} development problems", "", HEADER]
        for r in g["routed"].values():
            routed = ", ".join(f"{c} x{n}" for c, n in r.configs.items())
            lines.append(summary_row(r, f" (routed: {routed})"))
        lines.append("| *best fixed within budget* | | | | | | | |")
        for effort, b in g["best_fixed"].items():
            fits = "" if b.fits else ", none fits: cheapest"
            lines.append(summary_row(b.summary, f" @ {effort} (budget {b.budget:.0f}, {b.competing} compete{fits})"))
        lines.append("| *every fixed configuration* | | | | | | | |")
        lines += [summary_row(f) for f in g["fixed"]]
        lines.append("")
    return "\n".join(lines)


def as_json(groups: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The groups with every summary as a plain dict (the raw JSON's ``groups``)."""

    def dump(v: Any) -> Any:
        if isinstance(v, Summary | BestFixed):
            return v.as_dict()
        if isinstance(v, dict):
            return {k: dump(x) for k, x in v.items()}
        if isinstance(v, list):
            return [dump(x) for x in v]
        return v

    return {name: dump(dict(g)) for name, g in groups.items()}

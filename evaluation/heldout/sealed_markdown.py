"""A sealed-split report (:func:`~.sealed_report.report`) as Markdown: the checks, then tables per
effort, per task kind, per family, and the served confidence per strategy (formatting only)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evaluation.heldout.checks import Check

ROW_HEADER = (
    "| answered | accuracy % | 95% CI | coverage % | errors | missing "
    "| candidates mean / sd / p90 | generated tok mean / sd / p90 | p50 s | strategies |"
)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _spread(s: Mapping[str, float | None], digits: int = 1) -> str:
    if s["mean"] is None:
        return "-"
    return " / ".join(f"{float(s[k] or 0):.{digits}f}" for k in ("mean", "sd", "p90"))


def _cells(r: Mapping[str, Any]) -> str:
    ci = "-" if r["interval"] is None else f"[{_pct(r['interval'][0])}, {_pct(r['interval'][1])}]"
    p50 = "-" if r["p50_latency_s"] is None else f"{r['p50_latency_s']:.1f}"
    strategies = ", ".join(f"{s or '?'} {n}" for s, n in r["strategies"].items()) or "-"
    return (f"{r['answered']}/{r['problems']} | {_pct(r['accuracy'])} | {ci} | {_pct(r['coverage'])} | {r['errors']} "
            f"| {r['missing']} | {_spread(r['candidates'], 2)} | {_spread(r['generated_tokens'], 0)} | {p50} "
            f"| {strategies} |")  # fmt: skip


def _grouped(title: str, label: str, groups: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> list[str]:
    lines = ["", f"## {title}", "", f"| {label} | effort {ROW_HEADER}", "|---" * (ROW_HEADER.count("|") + 1) + "|"]
    for group, rows in groups.items():
        lines += [f"| {group} | `{e}` | {_cells(r)}" for e, r in rows.items()]
    return lines


def _calibration(name: str, c: Mapping[str, Any]) -> str:
    if c["ece"] is None:
        return f"| {name} | {c['answers']} | {c['without_confidence']} | - | - | - | - |"
    low, high = c["interval"]
    return (f"| {name} | {c['answers']} | {c['without_confidence']} | {c['ece']:.3f} | [{low:.3f}, {high:.3f}] "
            f"| {_pct(c['mean_confidence'])} | {_pct(c['accuracy'])} |")  # fmt: skip


def _reliability(name: str, bins: Sequence[Mapping[str, Any]]) -> list[str]:
    filled = [b for b in bins if b["answers"]]
    if not filled:
        return []
    lines = ["", f"Reliability of `{name}`:", "", "| confidence | answers | mean confidence % | accuracy % |",
             "|---|---|---|---|"]  # fmt: skip
    lines += [f"| {b['low']:.1f}-{b['high']:.1f} | {b['answers']} | {_pct(b['mean_confidence'])} "
              f"| {_pct(b['accuracy'])} |" for b in filled]  # fmt: skip
    return lines


def _provenance(body: Mapping[str, Any]) -> str:
    """Where the figures come from: the split, the chunks, the code, model, table and machine."""
    split, load = body["split"], body["load_average_1min"]
    efforts = ", ".join(f"`{e}`" for e in body["efforts"])
    shown = "-" if load is None else f"mean {load['mean']:.2f}, max {load['max']:.2f}"
    return (
        f"{split['problems']} problems of {len(split['families'])} reasoning-gym families no calibration saw "
        f"({', '.join(split['families'])}), efforts {efforts}, sent through the gateway with the official `openai` "
        f"SDK. {body['chunks']} chunks, {body['started_at']} to {body['ended_at']}; code "
        f"{', '.join(body['code_revisions']) or '-'} (stack started from "
        f"{', '.join(body.get('served_revisions') or ['not recorded'])}); model sha256 "
        f"{_short(body['model_sha256'])}; table sha256 {_short(body['table_sha256'])}; 1-minute load average {shown}."
    )


def _short(hashes: Sequence[str]) -> str:
    return ", ".join(h[:12] for h in hashes) or "-"


def _completeness(body: Mapping[str, Any]) -> str:
    """How much is recorded, what failed, and where the gateway's task kind moved with the effort."""
    missing = sum(body["missing"].values())
    if missing:
        per = ", ".join(f"{e} {n}" for e, n in body["missing"].items())
        text = f"**Partial run: {missing} of {body['pairs']} (problem, effort) pairs missing** ({per}); "
        text += "the figures are over what is recorded."
    else:
        text = f"Complete: every one of {body['pairs']} (problem, effort) pairs has a record."
    text += f" Infrastructure errors, excluded and never counted wrong: {body['errors'] or 'none'}."
    if body["kinds_differing_by_effort"]:
        moved = body["kinds_differing_by_effort"]
        text += f" The gateway chose different task kinds at different efforts for {moved} problems"
        text += " (each counts under its first answered kind)."
    return text


def markdown(body: Mapping[str, Any]) -> str:
    """The report's Markdown."""
    lines = [f"# Sealed test split, run `{body['run_id']}`", "", _provenance(body), "", _completeness(body), ""]
    lines += ["## Must-show checks", "", *[Check(**c).line() for c in body["checks"]]]
    diff = body["high_minus_low"]
    if diff is not None:
        low, high = diff["interval"]
        lines += ["", f"`high` - `low` (paired, {diff['problems']} problems answered at both): "
                      f"{100 * diff['difference']:+.1f} points, 95% bootstrap interval "
                      f"[{100 * low:+.1f}, {100 * high:+.1f}]."]  # fmt: skip
    lines += ["", "## Per effort", "", f"| effort {ROW_HEADER}", "|---" * ROW_HEADER.count("|") + "|"]
    lines += [f"| `{e}` | {_cells(r)}" for e, r in body["per_effort"].items()]
    lines += _grouped("Per task kind (the kind the gateway chose)", "kind", body["per_kind"])
    efforts = body["efforts"]
    lines += ["", "## Accuracy % per family", "", f"| family | {' | '.join(f'`{e}`' for e in efforts)} |",
              "|---" * (len(efforts) + 1) + "|"]  # fmt: skip
    lines += [f"| {f} | {' | '.join(_pct(rows[e]['accuracy']) for e in efforts)} |"
              for f, rows in body["per_family"].items()]  # fmt: skip
    conf = body["confidence"]
    lines += ["", "## Served confidence (ECE, 10 equal bins, 95% bootstrap over problems)", "",
              "| strategy | answers | without confidence | ECE | 95% CI | mean confidence % | accuracy % |",
              "|---|---|---|---|---|---|---|", _calibration("all", conf["all"])]  # fmt: skip
    lines += [_calibration(f"`{s}`", c) for s, c in conf["per_strategy"].items()]
    for s, c in conf["per_strategy"].items():
        lines += _reliability(s, c["reliability"])
    return "\n".join(lines) + "\n"

"""Render a cost-versus-accuracy report: Pareto charts as PNG and one self-contained HTML page.

The page needs no network: charts are inline SVG (and the PNGs are written beside it), the
table sorting/filtering script is inline, no CDN. matplotlib runs on the Agg backend.
"""

from __future__ import annotations

import html
import io
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evaluation.report.tables import Row, RunTotals, pareto

_COLUMNS: list[tuple[str, str, str]] = [
    ("effort", "effort", "s"),
    ("strategy", "strategy", "s"),
    ("level", "level", "s"),
    ("requests", "requests", "d"),
    ("errors", "errors", "d"),
    ("selected", "selected acc.", "p"),
    ("pass_at_1", "pass@1", "p"),
    ("pass_at_k", "pass@k", "p"),
    ("k", "k", "d"),
    ("maj_at_k", "maj@k", "p"),
    ("coverage", "coverage", "p"),
    ("truncated", "cut at max_tokens", "p"),
    ("mean_tokens", "tokens/req", "f0"),
    ("mean_prompt_tokens", "prompt tok/req", "f0"),
    ("mean_completion_tokens", "generated tok/req", "f0"),
    ("mean_reasoning_tokens", "reasoning tok/req", "f0"),
    ("tokens_per_correct", "tokens/correct", "f0"),
    ("cost_per_correct", "$/correct", "e"),
    ("latency_p50", "p50 s", "f2"),
    ("latency_p95", "p95 s", "f2"),
    ("latency_p99", "p99 s", "f2"),
    ("ttft_p50", "TTFT p50 s", "f2"),
    ("ttfa_p50", "first answer token p50 s", "f2"),
]


def _fmt(value: Any, kind: str) -> str:
    if value is None:
        return "-"
    if kind == "p":
        return f"{100 * value:.1f}%"
    if kind == "d":
        return str(value)
    if kind == "e":
        return f"{value:.2e}"
    if kind.startswith("f"):
        return f"{value:.{int(kind[1:])}f}"
    return html.escape(str(value))


def pareto_figure(rows: Sequence[Row], x_attr: str, x_label: str, title: str) -> Any:
    """A matplotlib figure: every (effort, strategy) cell as a point, the frontier as a line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = [r for r in rows if r.level == "all" and r.selected is not None and getattr(r, x_attr) is not None]
    fig, ax = plt.subplots(figsize=(7.5, 4.8), dpi=110)
    points = [(float(getattr(r, x_attr)), float(r.selected or 0.0)) for r in cells]
    strategies = sorted({r.strategy for r in cells})
    markers = "osD^v<>pP*hX"
    for si, strategy in enumerate(strategies):
        xs = [p[0] for p, r in zip(points, cells, strict=True) if r.strategy == strategy]
        ys = [p[1] for p, r in zip(points, cells, strict=True) if r.strategy == strategy]
        ax.scatter(xs, ys, marker=markers[si % len(markers)], s=46, label=strategy, alpha=0.85)
    for p, r in zip(points, cells, strict=True):
        ax.annotate(r.effort, p, textcoords="offset points", xytext=(4, 4), fontsize=7)
    front = pareto(points)
    if front:
        ax.plot([points[i][0] for i in front], [points[i][1] for i in front], "k--", lw=1, label="Pareto frontier")
    ax.set_xlabel(x_label)
    ax.set_ylabel("selected accuracy")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if cells:
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def figure_bytes(fig: Any, fmt: str) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format=fmt)
    plt.close(fig)
    return buf.getvalue()


def _svg_inline(svg: bytes) -> str:
    text = svg.decode("utf-8")
    start = text.find("<svg")
    text = text[start:] if start >= 0 else text
    return re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.DOTALL)


def _table(rows: Sequence[Row]) -> str:
    head = "".join(f'<th data-col="{i}" data-kind="{k}">{html.escape(t)}</th>' for i, (_, t, k) in enumerate(_COLUMNS))
    body = []
    for r in rows:
        cells = []
        for attr, _, kind in _COLUMNS:
            value = getattr(r, attr)
            sort = "" if value is None else str(value)
            cells.append(f'<td data-v="{html.escape(sort)}">{_fmt(value, kind)}</td>')
        extra = html.escape(json.dumps({"applied": r.strategies_applied, "termination": r.terminations,
                                        "errors": r.error_kinds}))  # fmt: skip
        body.append(f'<tr data-level="{html.escape(r.level)}" title="{extra}">{"".join(cells)}</tr>')
    return f'<table id="rows"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


_SCRIPT = """
(function () {
  const table = document.getElementById('rows');
  const body = table.tBodies[0];
  let dir = 1, last = -1;
  table.querySelectorAll('th').forEach(function (th) {
    th.addEventListener('click', function () {
      const col = Number(th.dataset.col), text = th.dataset.kind === 's';
      dir = (col === last) ? -dir : 1; last = col;
      const rows = Array.from(body.rows);
      rows.sort(function (a, b) {
        const x = a.cells[col].dataset.v, y = b.cells[col].dataset.v;
        if (x === '' || y === '') { return (x === '') - (y === ''); }
        return dir * (text ? x.localeCompare(y) : Number(x) - Number(y));
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
  const pick = document.getElementById('level');
  pick.addEventListener('change', function () {
    Array.from(body.rows).forEach(function (r) {
      r.hidden = pick.value !== '*' && r.dataset.level !== pick.value;
    });
  });
  document.getElementById('status').textContent = body.rows.length + ' rows';
})();
"""

_STYLE = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222}
table{border-collapse:collapse;font-size:12px}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}
th{background:#f2f2f2;cursor:pointer;position:sticky;top:0}
td:nth-child(-n+3){text-align:left}
tr[data-level=all]{font-weight:600}
.charts{display:flex;flex-wrap:wrap;gap:16px}
.charts figure{margin:0;border:1px solid #ddd;padding:6px}
.notes{max-width:60em}
pre{background:#f7f7f7;padding:8px;overflow:auto}
"""


def render_page(
    title: str, rows: Sequence[Row], totals: RunTotals, meta: dict[str, Any], charts_svg: Sequence[str],
    notes: Sequence[str] = (),
) -> str:  # fmt: skip
    levels = sorted({r.level for r in rows})
    options = '<option value="*">all rows</option>' + "".join(
        f'<option value="{html.escape(lv)}">level {html.escape(lv)}</option>' for lv in levels
    )
    summary = (
        f"{totals.requests} requests, {totals.errors} errors, wall {totals.wall_s:.0f} s, "
        f"{totals.requests_per_s:.3f} req/s, {totals.completion_tokens_per_s:.1f} completion tok/s, "
        f"{totals.correct_per_s:.3f} correct/s"
    )
    notes_html = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
    figures = "".join(f"<figure>{svg}</figure>" for svg in charts_svg)
    meta_json = html.escape(json.dumps(meta, indent=1, sort_keys=True, default=str))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>{html.escape(title)}</title>
<style>{_STYLE}</style></head><body>
<h1>{html.escape(title)}</h1>
<p id="summary">{html.escape(summary)}</p>
<ul class="notes">{notes_html}</ul>
<div class="charts">{figures}</div>
<h2>Per effort, strategy and difficulty level</h2>
<p><label>show <select id="level">{options}</select></label> <span id="status"></span>
 — click a header to sort; hover a row for applied strategies, terminations and error kinds.</p>
{_table(rows)}
<h2>Run</h2><details><summary>run.json</summary><pre>{meta_json}</pre></details>
<script>{_SCRIPT}</script>
</body></html>
"""


def write_report(
    out_dir: Path, title: str, rows: Sequence[Row], totals: RunTotals, meta: dict[str, Any],
    notes: Sequence[str] = (),
) -> Path:  # fmt: skip
    """Write ``pareto_tokens.png``, ``pareto_latency.png``, ``rows.json`` and ``report.html``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    charts = []
    for name, attr, label in (
        ("pareto_tokens", "mean_tokens", "mean tokens per request (prompt + completion, hidden reasoning included)"),
        ("pareto_latency", "latency_p95", "p95 latency (s)"),
    ):
        title_chart = f"accuracy vs {'tokens' if attr == 'mean_tokens' else 'p95 latency'}"
        (out_dir / f"{name}.png").write_bytes(figure_bytes(pareto_figure(rows, attr, label, title_chart), "png"))
        charts.append(_svg_inline(figure_bytes(pareto_figure(rows, attr, label, title_chart), "svg")))
    (out_dir / "rows.json").write_text(json.dumps([r.__dict__ for r in rows], indent=1, default=str))
    page = out_dir / "report.html"
    page.write_text(render_page(title, rows, totals, meta, charts, notes), encoding="utf-8")
    return page

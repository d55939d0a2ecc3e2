"""Write the Grafana dashboard deploy/grafana/dashboards/ttc-serve.json from a short description.

A dashboard JSON is thousands of lines of layout boilerplate around a few dozen PromQL
queries; the queries are what matter and what must track the metric names the services
export, so they are written here once and the JSON is generated. Docker-compose provisions
the file; on Kubernetes import it (or mount it with the Grafana sidecar).

Usage: ``python scripts/grafana_dashboard.py`` (write) or ``--check`` (fail if stale).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DASHBOARD_PATH = Path(__file__).resolve().parent.parent / "deploy" / "grafana" / "dashboards" / "ttc-serve.json"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


@dataclass(frozen=True)
class Panel:
    """One time-series (or stat) panel: a title, its queries as (PromQL, legend), a unit."""

    title: str
    queries: tuple[tuple[str, str], ...]
    unit: str = "short"
    description: str = ""
    kind: str = "timeseries"
    max: float | None = None
    stack: bool = False


@dataclass(frozen=True)
class Row:
    title: str
    panels: tuple[Panel, ...] = field(default_factory=tuple)


def q(expr: str, legend: str = "") -> tuple[str, str]:
    return expr, legend


RATE = "$__rate_interval"


def quantile(p: float, histogram: str, by: str = "", selector: str = "") -> str:
    """``histogram_quantile`` of a histogram's buckets, aggregated over everything but ``by``."""
    labels = ", ".join(["le", *([by] if by else [])])
    return f"histogram_quantile({p}, sum by ({labels}) (rate({histogram}_bucket{selector}[{RATE}])))"


def ratio(numerator: str, denominator: str, by: str = "") -> str:
    """Rate of one counter over another, per ``by``."""
    group = f" by ({by})" if by else ""
    return f"sum{group} (rate({numerator}[{RATE}])) / sum{group} (rate({denominator}[{RATE}]))"


ROWS: tuple[Row, ...] = (
    Row(
        "Traffic and latency",
        (
            Panel(
                "Completion requests by applied effort",
                (q(f"sum by (effort) (rate(ttc_gateway_requests_total[{RATE}]))", "{{effort}}"),),
                unit="reqps",
                stack=True,
            ),
            Panel(
                "Gateway latency percentiles",
                tuple(
                    q(
                        quantile(p, "ttc_request_duration_seconds", selector='{service="gateway"}'),
                        f"p{int(p * 100)}",
                    )
                    for p in (0.5, 0.9, 0.95, 0.99)
                ),
                unit="s",
            ),
            Panel(
                "Time to first token (p50 / p95)",
                (
                    q(
                        quantile(0.5, "ttc_gateway_time_to_first_token_seconds", "stream"),
                        "p50 stream={{stream}}",
                    ),
                    q(
                        quantile(0.95, "ttc_gateway_time_to_first_token_seconds", "stream"),
                        "p95 stream={{stream}}",
                    ),
                ),
                unit="s",
            ),
            Panel(
                "p95 latency by service and method",
                (
                    q(
                        quantile(0.95, "ttc_request_duration_seconds", "service, method"),
                        "{{service}} {{method}}",
                    ),
                ),
                unit="s",
            ),
            Panel(
                "Error ratio by service",
                (
                    q(
                        ratio("ttc_errors_total", "ttc_requests_total", "service"),
                        "{{service}}",
                    ),
                    q(
                        ratio('ttc_gateway_requests_total{status=~"5.."}', "ttc_gateway_requests_total"),
                        "gateway 5xx",
                    ),
                ),
                unit="percentunit",
            ),
            Panel(
                "Requests in flight",
                (q("sum by (service) (ttc_requests_in_flight)", "{{service}}"),),
            ),
        ),
    ),
    Row(
        "Test-time compute: tokens by effort",
        (
            Panel(
                "Completion tokens/s by effort (answer + reasoning)",
                (q(f"sum by (effort) (rate(ttc_gateway_completion_tokens_total[{RATE}]))", "{{effort}}"),),
                unit="short",
                stack=True,
            ),
            Panel(
                "Reasoning tokens/s by effort",
                (q(f"sum by (effort) (rate(ttc_gateway_reasoning_tokens_total[{RATE}]))", "{{effort}}"),),
                unit="short",
                stack=True,
            ),
            Panel(
                "Reasoning tokens per request by effort",
                (
                    q(
                        f"sum by (effort) (rate(ttc_gateway_reasoning_tokens_total[{RATE}]))"
                        f' / sum by (effort) (rate(ttc_gateway_requests_total{{status=~"2.."}}[{RATE}]))',
                        "{{effort}}",
                    ),
                ),
                description="Hidden tokens (every candidate, verifier and search call) spent per answered request.",
            ),
            Panel(
                "Tokens/s by service and kind",
                (q(f"sum by (service, kind) (rate(ttc_tokens_total[{RATE}]))", "{{service}} {{kind}}"),),
                unit="short",
            ),
            Panel(
                "Effort degradations (requested → applied)",
                (
                    q(
                        f"sum by (requested, applied, signal) (rate(ttc_gateway_effort_degradations_total[{RATE}]))",
                        "{{requested}} → {{applied}} ({{signal}})",
                    ),
                ),
                unit="reqps",
                description="Requests whose effort admission control lowered, by the signal that triggered it.",
            ),
            Panel(
                "Requests shed (429) by reason",
                (q(f"sum by (reason) (rate(ttc_gateway_shed_total[{RATE}]))", "{{reason}}"),),
                unit="reqps",
            ),
        ),
    ),
    Row(
        "Capacity: queue and KV cache",
        (
            Panel(
                "Search queue depth",
                (
                    q("max(ttc_gateway_queue_depth)", "queued jobs"),
                    q("sum(ttc_sandbox_queue_depth)", "sandbox waiting for a slot"),
                ),
            ),
            Panel(
                "Queue wait (p50 / p95)",
                (
                    q(
                        quantile(0.5, "ttc_gateway_queue_wait_seconds"),
                        "p50",
                    ),
                    q(
                        quantile(0.95, "ttc_gateway_queue_wait_seconds"),
                        "p95",
                    ),
                ),
                unit="s",
            ),
            Panel(
                "KV-cache utilization",
                (
                    q("max by (engine, model) (ttc_kv_cache_utilization)", "{{engine}} {{model}}"),
                    q("max by (instance) (vllm:kv_cache_usage_perc)", "vLLM {{instance}}"),
                    q("max(ttc_gateway_engine_kv_utilization)", "seen by gateway"),
                ),
                unit="percentunit",
                max=1.0,
            ),
            Panel(
                "Policy engine requests running / waiting",
                (
                    q("sum by (engine) (ttc_policy_requests_running)", "running {{engine}}"),
                    q("sum by (engine) (ttc_policy_requests_waiting)", "waiting {{engine}}"),
                    q("sum(vllm:num_requests_waiting)", "waiting (vLLM's own metric)"),
                ),
                description="Engine queue as the policy service reports it; policy replicas scale on 'waiting'.",
            ),
        ),
    ),
    Row(
        "Sandbox and verifier",
        (
            Panel(
                "Sandbox outcomes",
                (q(f"sum by (status) (rate(ttc_sandbox_executions_total[{RATE}]))", "{{status}}"),),
                unit="ops",
                stack=True,
                description="sandbox_error is an infrastructure failure, never a wrong answer.",
            ),
            Panel(
                "Sandbox kills by reason",
                (q(f"sum by (reason) (rate(ttc_sandbox_kills_total[{RATE}]))", "{{reason}}"),),
                unit="ops",
            ),
            Panel(
                "Sandbox run time (p50 / p95)",
                (
                    q(
                        quantile(0.5, "ttc_sandbox_execution_duration_seconds"),
                        "p50",
                    ),
                    q(
                        quantile(0.95, "ttc_sandbox_execution_duration_seconds"),
                        "p95",
                    ),
                ),
                unit="s",
            ),
            Panel(
                "Verifier outcomes",
                (
                    q(
                        f"sum by (verifier, outcome) (rate(ttc_verifier_candidates_total[{RATE}]))",
                        "{{verifier}} {{outcome}}",
                    ),
                ),
                unit="ops",
            ),
        ),
    ),
)

PANEL_WIDTH = 8
PANEL_HEIGHT = 8


def _panel_json(panel: Panel, panel_id: int, x: int, y: int) -> dict[str, Any]:
    defaults: dict[str, Any] = {"unit": panel.unit}
    if panel.max is not None:
        defaults["max"] = panel.max
        defaults["min"] = 0
    if panel.stack:
        defaults["custom"] = {"stacking": {"mode": "normal", "group": "A"}, "fillOpacity": 20}
    return {
        "id": panel_id,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": DATASOURCE,
        "gridPos": {"h": PANEL_HEIGHT, "w": PANEL_WIDTH, "x": x, "y": y},
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}, "tooltip": {"mode": "multi"}},
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": expr, "legendFormat": legend}
            for i, (expr, legend) in enumerate(panel.queries)
        ],
    }


def build() -> dict[str, Any]:
    panels: list[dict[str, Any]] = []
    next_id = 1
    y = 0
    for row in ROWS:
        panels.append(
            {
                "id": next_id,
                "type": "row",
                "title": row.title,
                "collapsed": False,
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
            }
        )
        next_id += 1
        y += 1
        for i, panel in enumerate(row.panels):
            x = (i % (24 // PANEL_WIDTH)) * PANEL_WIDTH
            if i and x == 0:
                y += PANEL_HEIGHT
            panels.append(_panel_json(panel, next_id, x, y))
            next_id += 1
        y += PANEL_HEIGHT
    return {
        "uid": "ttc-serve",
        "title": "ttc-serve",
        "description": "Test-time compute serving: effort, tokens, latency, queue, KV cache, sandbox.",
        "tags": ["ttc-serve"],
        "timezone": "browser",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "refresh": "30s",
        "time": {"from": "now-1h", "to": "now"},
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Prometheus",
                    "type": "datasource",
                    "query": "prometheus",
                    "current": {},
                    "hide": 0,
                }
            ]
        },
        "annotations": {"list": []},
        "panels": panels,
    }


def expressions() -> list[str]:
    """Every PromQL expression on the dashboard (the tests parse them)."""
    return [expr for row in ROWS for panel in row.panels for expr, _ in panel.queries]


def render() -> str:
    return json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="fail if the dashboard JSON is out of date")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not DASHBOARD_PATH.is_file() or DASHBOARD_PATH.read_text() != text:
            print(f"{DASHBOARD_PATH} is stale: run python scripts/grafana_dashboard.py", file=sys.stderr)
            return 1
        return 0
    DASHBOARD_PATH.parent.mkdir(parents=True, exist_ok=True)
    DASHBOARD_PATH.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Alert rules (promtool), the Prometheus config, and the Grafana dashboard's queries.

The dashboard and the alerts are only useful if their metric names are the ones the services
export; the alignment test reads the services' metric definitions and fails on a rename.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from tests.deploy.conftest import ROOT, Tools, run

ALERTS = ROOT / "helm" / "ttc" / "files" / "prometheus-alerts.yml"
ALERT_TESTS = ROOT / "deploy" / "prometheus" / "alerts_test.yml"
PROMETHEUS_CONFIG = ROOT / "deploy" / "prometheus" / "prometheus.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "ttc-serve.json"

sys.path.insert(0, str(ROOT / "scripts"))
import grafana_dashboard  # noqa: E402

# Metric families that come from vLLM itself, not from this project's code.
EXTERNAL_PREFIXES = ("vllm:", "up")
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def test_promtool_check_rules(tools: Tools) -> None:
    proc = run([tools.promtool, "check", "rules", ALERTS])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def test_promtool_rejects_a_broken_rule(tools: Tools, tmp_path: Path) -> None:
    rules = yaml.safe_load(ALERTS.read_text())
    rules["groups"][0]["rules"][0]["expr"] = "max(ttc_gateway_queue_depth > "
    broken = tmp_path / "alerts.yml"
    broken.write_text(yaml.safe_dump(rules))
    proc = run([tools.promtool, "check", "rules", broken])
    assert proc.returncode != 0


def test_alert_rules_fire_as_specified(tools: Tools) -> None:
    """promtool unit tests: synthetic series in, expected alerts (labels, annotations) out."""
    proc = run([tools.promtool, "test", "rules", ALERT_TESTS])
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_prometheus_config_is_valid_and_loads_the_shared_rules(tools: Tools) -> None:
    proc = run([tools.promtool, "check", "config", PROMETHEUS_CONFIG])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (ROOT / "deploy" / "prometheus" / "alerts.yml").resolve() == ALERTS.resolve()


def test_required_alerts_exist() -> None:
    names = {r["alert"] for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]}
    assert {"TTCQueueBacklog", "TTCKVCacheSaturated", "TTCHighErrorRate", "TTCSandboxKills"} <= names


def test_dashboard_is_generated_from_its_description() -> None:
    proc = run(["python", ROOT / "scripts" / "grafana_dashboard.py", "--check"])
    assert proc.returncode == 0, proc.stderr


def test_dashboard_queries_parse_as_promql(tools: Tools, tmp_path: Path) -> None:
    """Every panel query, with Grafana's interval variable bound, is a valid PromQL expression."""
    exprs = grafana_dashboard.expressions()
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"dashboard:query{i}", "expr": e.replace("$__rate_interval", "5m")}
                    for i, e in enumerate(exprs)
                ],
            }
        ]
    }
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump(rules))
    proc = run([tools.promtool, "check", "rules", path])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in proc.stdout


def test_dashboard_covers_what_operators_ask_for() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    text = json.dumps(dashboard)
    for needle in (
        "ttc_gateway_reasoning_tokens_total",  # reasoning tokens by effort
        "ttc_gateway_completion_tokens_total",  # tokens by effort
        "histogram_quantile(0.99",  # latency percentiles
        "ttc_gateway_queue_depth",  # queue depth
        "ttc_kv_cache_utilization",  # KV cache
        "vllm:kv_cache_usage_perc",
        "ttc_gateway_effort_degradations_total",  # effort degradations
        "ttc_sandbox_executions_total",  # sandbox outcomes
    ):
        assert needle in text, needle
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    assert all(p.get("datasource", {}).get("uid") == "${datasource}" for p in dashboard["panels"] if p["type"] != "row")


def _metric_names(expr: str) -> set[str]:
    names = set(re.findall(r"\b(ttc_[a-z0-9_]+)", expr))
    out = set()
    for name in names:
        for suffix in HISTOGRAM_SUFFIXES:
            if name.endswith(suffix):
                name = name.removesuffix(suffix)
                break
        out.add(name)
    return out


def _exported_metric_names() -> set[str]:
    """Names passed to prometheus_client constructors anywhere under services/."""
    pattern = re.compile(r'(?:Counter|Gauge|Histogram|Summary)\(\s*"(ttc_[a-z0-9_]+)"', re.S)
    names: set[str] = set()
    for path in (ROOT / "services").rglob("*.py"):
        names |= set(pattern.findall(path.read_text()))
    return names


def _referenced_metric_names() -> dict[str, set[str]]:
    refs: dict[str, set[str]] = {}
    for expr in grafana_dashboard.expressions():
        for name in _metric_names(expr):
            refs.setdefault(name, set()).add("dashboard")
    for group in yaml.safe_load(ALERTS.read_text())["groups"]:
        for rule in group["rules"]:
            for name in _metric_names(rule["expr"]):
                refs.setdefault(name, set()).add(f"alert {rule['alert']}")
    return refs


def test_dashboard_and_alerts_use_metric_names_the_services_export() -> None:
    exported = _exported_metric_names()
    assert "ttc_requests_total" in exported, "metric definitions not found: the scan is broken"
    missing = {name: sorted(where) for name, where in _referenced_metric_names().items() if name not in exported}
    assert not missing, f"metrics referenced but not defined under services/: {missing}"


@pytest.mark.parametrize("name", ["ttc_renamed_metric_total"])
def test_alignment_check_catches_an_unknown_name(name: str) -> None:
    assert name not in _exported_metric_names()
    assert _metric_names(f"sum(rate({name}_bucket[5m]))") == {name}

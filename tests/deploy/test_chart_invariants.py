"""Properties every rendering of the chart must keep, checked on the rendered manifests.

Security (non-root, read-only root, no privilege escalation, no service-account token),
operability (resources and probes on every container), the sandbox's isolation (no egress),
queue-based scaling, and wiring (every target env var names a Service port that exists).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.conftest import CHART, VALUES_FILES, Renderer, by_kind, component_of

WORKLOAD_KINDS = ("Deployment", "StatefulSet")
COMPONENTS = ("gateway", "orchestrator", "verifier", "sandbox", "policy")


def workloads(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] in WORKLOAD_KINDS]


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "<from secret>") for e in container.get("env", [])}


def container_named(docs: list[dict[str, Any]], component: str) -> dict[str, Any]:
    for d in workloads(docs):
        if component_of(d) == component:
            return dict(d["spec"]["template"]["spec"]["containers"][0])
    raise AssertionError(f"no workload for {component}")


@pytest.mark.parametrize("name", sorted(VALUES_FILES))
def test_every_container_is_non_root_read_only_and_unprivileged(render: Renderer, name: str) -> None:
    docs = render(name)
    assert {component_of(d) for d in workloads(docs)} >= set(COMPONENTS) | {"redis"}
    for w in workloads(docs):
        pod = w["spec"]["template"]["spec"]
        pod_sc = pod.get("securityContext", {})
        for c in pod.get("initContainers", []) + pod["containers"]:
            where = f"{w['metadata']['name']}/{c['name']}"
            sc = c.get("securityContext", {})
            assert sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is True, where
            assert sc.get("runAsUser", pod_sc.get("runAsUser", 0)) != 0, where
            assert sc.get("readOnlyRootFilesystem") is True, where
            assert sc.get("allowPrivilegeEscalation") is False, where
            assert sc.get("privileged", False) is False, where
            assert sc.get("capabilities", {}).get("drop") == ["ALL"], where
            assert not sc.get("capabilities", {}).get("add"), where


@pytest.mark.parametrize("name", sorted(VALUES_FILES))
def test_every_container_has_resources_and_probes(render: Renderer, name: str) -> None:
    for w in workloads(render(name)):
        for c in w["spec"]["template"]["spec"]["containers"]:
            where = f"{w['metadata']['name']}/{c['name']}"
            for bound in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(c["resources"].get(bound, {})), f"{where} {bound}"
            assert "readinessProbe" in c, where
            assert "livenessProbe" in c, where


@pytest.mark.parametrize("name", sorted(VALUES_FILES))
def test_grpc_services_use_native_grpc_health_probes(render: Renderer, name: str) -> None:
    docs = render(name)
    for component, port in (("policy", 50051), ("verifier", 50052), ("sandbox", 50053)):
        c = container_named(docs, component)
        for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
            assert c[probe]["grpc"]["port"] == port, f"{component} {probe}"
    gateway = container_named(docs, "gateway")
    assert gateway["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert gateway["livenessProbe"]["httpGet"]["path"] == "/healthz"


@pytest.mark.parametrize("name", sorted(VALUES_FILES))
def test_no_pod_mounts_a_service_account_token(render: Renderer, name: str) -> None:
    docs = render(name)
    for w in workloads(docs):
        assert w["spec"]["template"]["spec"]["automountServiceAccountToken"] is False, w["metadata"]["name"]
    for sa in by_kind(docs, "ServiceAccount").values():
        assert sa["automountServiceAccountToken"] is False


@pytest.mark.parametrize("name", sorted(VALUES_FILES))
def test_writable_paths_are_emptydirs(render: Renderer, name: str) -> None:
    for w in workloads(render(name)):
        pod = w["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        claims = {t["metadata"]["name"] for t in w["spec"].get("volumeClaimTemplates", [])}
        for c in pod["containers"]:
            for m in c.get("volumeMounts", []):
                if m["name"] in claims or m.get("readOnly"):
                    continue
                assert "emptyDir" in volumes[m["name"]], f"{w['metadata']['name']}: {m['mountPath']}"


@pytest.mark.parametrize("name", ["default", "gpu"])
def test_sandbox_egress_is_denied(render: Renderer, name: str) -> None:
    docs = render(name)
    sandbox = by_kind(docs, "Deployment")["rel-ttc-sandbox"]
    pod_labels = sandbox["spec"]["template"]["metadata"]["labels"]
    policies = [
        p
        for p in by_kind(docs, "NetworkPolicy").values()
        if all(pod_labels.get(k) == v for k, v in p["spec"]["podSelector"]["matchLabels"].items())
    ]
    assert policies, "no NetworkPolicy selects the sandbox pods"
    for p in policies:
        assert "Egress" in p["spec"]["policyTypes"]
        assert p["spec"].get("egress", []) == [], "a sandbox NetworkPolicy allows some egress"
    # Nothing to export traces to without egress: the sandbox must not try.
    assert env_of(container_named(docs, "sandbox"))["TTC_OTEL_ENDPOINT"] == ""
    assert sandbox["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


def test_sandbox_options_runtime_class_seccomp_and_own_uid(render: Renderer) -> None:
    default = by_kind(render("default"), "Deployment")["rel-ttc-sandbox"]["spec"]["template"]["spec"]
    assert "runtimeClassName" not in default
    assert default["containers"][0]["securityContext"]["seccompProfile"] == {"type": "Unconfined"}
    assert default["securityContext"]["runAsUser"] == 10100
    others = {
        w["spec"]["template"]["spec"]["securityContext"]["runAsUser"]
        for w in by_kind(render("default"), "Deployment").values()
        if component_of(w) != "sandbox"
    }
    assert 10100 not in others
    gpu = by_kind(render("gpu"), "Deployment")["rel-ttc-sandbox"]["spec"]["template"]["spec"]
    assert gpu["runtimeClassName"] == "gvisor"
    assert gpu["containers"][0]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}


def test_orchestrator_scales_on_the_redis_queue_with_keda(render: Renderer) -> None:
    docs = render("gpu")
    scaled = by_kind(docs, "ScaledObject")["rel-ttc-orchestrator"]
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    target = scaled["spec"]["scaleTargetRef"]["name"]
    assert target in by_kind(docs, "Deployment")
    assert "replicas" not in by_kind(docs, "Deployment")[target]["spec"], "replicas would fight the autoscaler"
    redis = [t for t in scaled["spec"]["triggers"] if t["type"] == "redis"]
    assert len(redis) == 1
    meta = redis[0]["metadata"]
    assert meta["listName"] == "ttc.search"
    assert int(meta["listLength"]) == 8
    host, port = meta["address"].rsplit(":", 1)
    assert host in by_kind(docs, "Service") and port == "6379"
    # The queue KEDA watches is the one the gateway fills and the workers consume.
    assert env_of(container_named(docs, "gateway"))["TTC_JOBS_QUEUE"] == "ttc.search"
    assert env_of(container_named(docs, "orchestrator"))["TTC_JOBS_QUEUE"] == "ttc.search"
    assert "rel-ttc-orchestrator" not in by_kind(docs, "HorizontalPodAutoscaler"), "KEDA owns the HPA"


def test_orchestrator_hpa_fallback_uses_the_queue_metric(render: Renderer) -> None:
    docs = render("default", "orchestrator.autoscaling.externalMetric.enabled=true")
    hpa = by_kind(docs, "HorizontalPodAutoscaler")["rel-ttc-orchestrator"]
    external = [m["external"] for m in hpa["spec"]["metrics"] if m["type"] == "External"]
    assert external == [
        {
            "metric": {"name": "ttc_gateway_queue_depth"},
            "target": {"type": "AverageValue", "averageValue": "4"},
        }
    ]
    assert not by_kind(docs, "ScaledObject")


def test_policy_scales_on_engine_queue_and_kv_usage(render: Renderer) -> None:
    docs = render("gpu")
    scaled = by_kind(docs, "ScaledObject")["rel-ttc-policy"]
    assert scaled["spec"]["scaleTargetRef"]["name"] in by_kind(docs, "Deployment")
    prom = {t["metricType"]: t["metadata"] for t in scaled["spec"]["triggers"] if t["type"] == "prometheus"}
    assert prom["AverageValue"]["query"] == 'sum(ttc_policy_requests_waiting{namespace="ttc", component="policy"})'
    assert prom["AverageValue"]["threshold"] == "8"
    assert prom["Value"]["query"] == 'avg(ttc_kv_cache_utilization{namespace="ttc", component="policy"})'
    assert prom["Value"]["threshold"] == "0.85"
    assert all(m["serverAddress"].startswith("http") for m in prom.values())
    custom = render("gpu", "policy.autoscaling.query=sum(vllm:num_requests_waiting)")
    triggers = by_kind(custom, "ScaledObject")["rel-ttc-policy"]["spec"]["triggers"]
    assert "sum(vllm:num_requests_waiting)" in [t["metadata"].get("query") for t in triggers]
    fallback = render("gpu", "keda.enabled=false", "policy.autoscaling.externalMetric.enabled=true")
    hpa = by_kind(fallback, "HorizontalPodAutoscaler")["rel-ttc-policy"]
    names = [m["external"]["metric"]["name"] for m in hpa["spec"]["metrics"] if m["type"] == "External"]
    assert names == ["ttc_policy_requests_waiting"]


def test_gateway_has_an_hpa(render: Renderer) -> None:
    hpa = by_kind(render("default"), "HorizontalPodAutoscaler")["rel-ttc-gateway"]
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "rel-ttc-gateway"}
    assert hpa["spec"]["minReplicas"] >= 2


def test_gpu_policy_runs_vllm_on_gpu_nodes_with_the_model_volume(render: Renderer) -> None:
    docs = render("gpu")
    deployment = by_kind(docs, "Deployment")["rel-ttc-policy"]
    pod = deployment["spec"]["template"]["spec"]
    c = pod["containers"][0]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert c["resources"]["requests"]["nvidia.com/gpu"] == 1
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    env = env_of(c)
    assert env["TTC_POLICY_ENGINE"] == "vllm"
    assert env["TTC_POLICY_VLLM_TENSOR_PARALLEL_SIZE"] == "1"
    assert env["TTC_POLICY_MODELS_DIR"] == "/models"
    assert env["TTC_POLICY_MODEL"].startswith("/models/")
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    assert mounts["/models"]["readOnly"] is True
    volumes = {v["name"]: v for v in pod["volumes"]}
    claim = volumes[mounts["/models"]["name"]]["persistentVolumeClaim"]["claimName"]
    assert claim in by_kind(docs, "PersistentVolumeClaim")
    assert volumes["dshm"]["emptyDir"]["medium"] == "Memory"
    tp = render("gpu", "policy.gpus=4", "policy.vllm.tensorParallelSize=4")
    c4 = by_kind(tp, "Deployment")["rel-ttc-policy"]["spec"]["template"]["spec"]["containers"][0]
    assert c4["resources"]["limits"]["nvidia.com/gpu"] == 4
    assert env_of(c4)["TTC_POLICY_VLLM_TENSOR_PARALLEL_SIZE"] == "4"


def test_default_policy_is_the_embedded_cpu_model(render: Renderer) -> None:
    c = container_named(render("default"), "policy")
    assert "nvidia.com/gpu" not in c["resources"]["limits"]
    assert c["image"].startswith("ghcr.io/ttc-serve/policy-cpu:")
    env = env_of(c)
    assert env["TTC_POLICY_ENGINE"] == "llamacpp"
    assert env["TTC_POLICY_MODEL"] == "qwen2.5-coder-0.5b"
    assert "TTC_POLICY_MODELS_DIR" not in env, "the image's baked models must not be hidden"


@pytest.mark.parametrize("name", sorted(VALUES_FILES))
def test_every_target_names_an_existing_service_port(render: Renderer, name: str) -> None:
    docs = render(name)
    services = by_kind(docs, "Service")
    checked = 0
    for w in workloads(docs):
        for key, value in env_of(w["spec"]["template"]["spec"]["containers"][0]).items():
            if key.endswith("_TARGET") or key == "TTC_REDIS_URL":
                hostport = value.removeprefix("dns:///").removeprefix("redis://").split("/")[0]
                host, port = hostport.rsplit(":", 1)
                assert host in services, f"{key}={value}"
                assert int(port) in [p["port"] for p in services[host]["spec"]["ports"]], f"{key}={value}"
                checked += 1
    assert checked >= 10


@pytest.mark.parametrize("name", sorted(VALUES_FILES))
def test_services_and_budgets_select_their_pods(render: Renderer, name: str) -> None:
    docs = render(name)
    pods = {component_of(w): w["spec"]["template"]["metadata"]["labels"] for w in workloads(docs)}
    selectors = [(s["metadata"]["name"], s["spec"]["selector"]) for s in by_kind(docs, "Service").values()]
    selectors += [
        (p["metadata"]["name"], p["spec"]["selector"]["matchLabels"])
        for p in by_kind(docs, "PodDisruptionBudget").values()
    ]
    assert selectors
    for obj, selector in selectors:
        matches = [c for c, labels in pods.items() if all(labels.get(k) == v for k, v in selector.items())]
        assert len(matches) == 1, f"{obj} selects {matches}"


def test_every_component_has_a_disruption_budget_by_default(render: Renderer) -> None:
    budgets = by_kind(render("default"), "PodDisruptionBudget")
    assert {component_of(b) for b in budgets.values()} == set(COMPONENTS)
    assert not by_kind(render("minimal"), "PodDisruptionBudget")


def test_monitoring_objects_follow_their_flags(render: Renderer) -> None:
    default = render("default")
    assert not by_kind(default, "ServiceMonitor") and not by_kind(default, "PrometheusRule")
    docs = render("gpu")
    monitors = by_kind(docs, "ServiceMonitor")
    services = by_kind(docs, "Service")
    assert {component_of(m) for m in monitors.values()} == set(COMPONENTS)
    for m in monitors.values():
        svc = services[m["metadata"]["name"]]
        port_names = {p["name"] for p in svc["spec"]["ports"]}
        for endpoint in m["spec"]["endpoints"]:
            assert endpoint["port"] in port_names
            assert endpoint["honorLabels"] is True
    rule = next(iter(by_kind(docs, "PrometheusRule").values()))
    alerts_file = yaml.safe_load((CHART / "files" / "prometheus-alerts.yml").read_text())
    assert rule["spec"] == alerts_file
    names = {r["alert"] for g in rule["spec"]["groups"] for r in g["rules"]}
    assert {"TTCQueueBacklog", "TTCKVCacheSaturated", "TTCHighErrorRate", "TTCSandboxKills"} <= names


def test_user_env_overrides_the_chart_wiring_without_duplicates(render: Renderer) -> None:
    docs = render("default", "verifier.env.TTC_VERIFIER_POLICY_TARGET=elsewhere:1", "verifier.env.TTC_EXTRA=1")
    c = container_named(docs, "verifier")
    names = [e["name"] for e in c["env"]]
    assert len(names) == len(set(names))
    env = env_of(c)
    assert env["TTC_VERIFIER_POLICY_TARGET"] == "elsewhere:1"
    assert env["TTC_EXTRA"] == "1"


def test_disabled_components_render_nothing(render: Renderer) -> None:
    docs = render("default", "sandbox.enabled=false", "redis.enabled=false", "redis.externalUrl=redis://ext:6379/0")
    assert all(component_of(d) not in ("sandbox", "redis") for d in docs if "labels" in d["metadata"])
    assert not by_kind(docs, "NetworkPolicy")
    assert env_of(container_named(docs, "gateway"))["TTC_REDIS_URL"] == "redis://ext:6379/0"


def test_values_files_use_the_same_component_keys() -> None:
    """One shape everywhere: every component has the same common sub-keys in values.yaml."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    common = {"enabled", "image", "replicas", "resources", "env", "nodeSelector", "tolerations", "affinity"}
    for component in (*COMPONENTS, "redis"):
        assert common <= set(values[component]), component
        assert {"repository", "tag", "pullPolicy"} <= set(values[component]["image"]), component


def _settings_fields() -> dict[str, set[str]]:
    """Environment variable names each service's settings class reads (prefix → field names)."""
    import importlib

    from services.common.settings import CommonSettings

    fields = {"TTC_": set(CommonSettings.model_fields)}
    for module_name in (*(f"services.{c}.settings" for c in (*COMPONENTS, "jobs")), "evaluation.report.settings"):
        module = importlib.import_module(module_name)
        cls = next(
            v
            for k, v in vars(module).items()
            if k.endswith("Settings") and getattr(v, "__module__", "") == module.__name__
        )
        fields[str(cls.model_config.get("env_prefix"))] = set(cls.model_fields)
    return fields


def _unknown_settings(names: set[str]) -> list[str]:
    fields = _settings_fields()
    unknown = []
    for name in sorted(n for n in names if n.startswith("TTC_")):
        # The longest matching prefix decides: TTC_POLICY_MODEL is the policy's "model", not common.
        prefix = max((p for p in fields if name.startswith(p)), key=len)
        if name.removeprefix(prefix).lower() not in fields[prefix]:
            unknown.append(name)
    return unknown


@pytest.mark.parametrize("name", sorted(VALUES_FILES))
def test_chart_sets_only_settings_the_services_read(render: Renderer, name: str) -> None:
    extra = (
        ("policy.engine=openai", "policy.openai.baseUrl=http://x/v1", "policy.openai.model=m")
        if name == "minimal"
        else ()
    )
    names = {
        e
        for w in workloads(render(name, *extra))
        for c in w["spec"]["template"]["spec"]["containers"]
        for e in env_of(c)
    }
    assert len(names) > 20
    assert _unknown_settings(names) == []


def test_settings_check_catches_a_misspelt_variable() -> None:
    assert _unknown_settings({"TTC_GATEWAY_POLICY_TARGT", "TTC_LOG_LEVEL"}) == ["TTC_GATEWAY_POLICY_TARGT"]


def _attributes_read(root: Path, where: tuple[str, ...]) -> set[str]:
    """Every attribute name read (``x.name``) in the files under ``where`` (outside settings modules)."""
    names: set[str] = set()
    for place in where:
        paths = [root / place] if place.endswith(".py") else list((root / place).rglob("*.py"))
        for path in paths:
            if path.name == "settings.py" or "gen" in path.relative_to(root).parts[:2]:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                    names.add(node.attr)
    return names


def _readers(prefix: str) -> tuple[str, ...]:
    """Where a settings class's fields may be read: shared settings anywhere in ``services/``; a
    service's own in its package and the local launcher; the evaluation's also in ``loadtests/``."""
    if prefix in ("TTC_", "TTC_JOBS_"):
        return ("services",)
    if prefix == "TTC_EVAL_":
        return ("evaluation", "loadtests")
    return (f"services/{prefix.removeprefix('TTC_').rstrip('_').lower()}", "services/stack.py")


def _unread_settings(fields: dict[str, set[str]], read: dict[str, set[str]]) -> list[str]:
    return sorted(f"{prefix}{name.upper()}" for prefix, names in fields.items() for name in names - read[prefix])


def test_every_setting_is_read_by_some_code() -> None:
    """A declared setting that no code reads is dead wiring (compose and the chart would set it for
    nothing): each field must be read as an attribute by the code that owns it. (By name: a field
    whose name is read for another reason in the same package slips through.)"""
    root, fields = CHART.parents[1], _settings_fields()
    read = {prefix: _attributes_read(root, _readers(prefix)) for prefix in fields}
    assert _unread_settings(fields, read) == []


def test_unread_settings_check_catches_a_dead_setting() -> None:
    fields = {"TTC_ORCHESTRATOR_": {"policy_target", "sandbox_target"}}
    assert _unread_settings(fields, {"TTC_ORCHESTRATOR_": {"policy_target"}}) == ["TTC_ORCHESTRATOR_SANDBOX_TARGET"]


def test_compose_and_images_set_only_settings_the_services_read() -> None:
    root = CHART.parents[1]
    compose = yaml.safe_load((root / "docker-compose.yml").read_text())
    names = {k for s in compose["services"].values() for k in (s.get("environment") or {})}
    names |= set(re.findall(r"\b(TTC_[A-Z0-9_]+)=", (root / "docker" / "Dockerfile").read_text()))
    assert len(names) > 20
    assert _unknown_settings(names) == []

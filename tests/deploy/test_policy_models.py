"""Several models behind one release: policy.extraModels renders a Deployment and headless
Service per model, and the workers and gateway get each model's target."""

from __future__ import annotations

import json
import os
import subprocess

from tests.deploy.conftest import ROOT, Renderer, Tools, by_kind, run

SMOL = ("policy.extraModels[0].name=smollm2", "policy.extraModels[0].model=smollm2-135m")


def env_of(deployment: dict) -> dict[str, str]:  # type: ignore[type-arg]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value", "") for e in container["env"]}


def test_default_release_has_one_policy_and_no_targets(render: Renderer) -> None:
    deployments = by_kind(render("default"), "Deployment")
    assert [n for n in deployments if "policy" in n] == ["rel-ttc-policy"]
    assert "TTC_ORCHESTRATOR_POLICY_TARGETS" not in env_of(deployments["rel-ttc-orchestrator"])


def test_an_extra_model_gets_its_own_deployment_service_and_route(render: Renderer) -> None:
    docs = render("default", *SMOL)
    deployments, services = by_kind(docs, "Deployment"), by_kind(docs, "Service")
    smol, qwen = deployments["rel-ttc-policy-smollm2"], deployments["rel-ttc-policy"]
    assert env_of(smol)["TTC_POLICY_MODEL"] == "smollm2-135m"
    assert env_of(qwen)["TTC_POLICY_MODEL"] == "qwen2.5-coder-0.5b"
    assert env_of(smol)["TTC_POLICY_ENGINE"] == "llamacpp" and smol["spec"]["replicas"] == 1
    # Distinct selectors: neither Service reaches the other model's pods.
    smol_labels = smol["spec"]["template"]["metadata"]["labels"]
    assert services["rel-ttc-policy"]["spec"]["selector"]["app.kubernetes.io/component"] == "policy"
    assert services["rel-ttc-policy-smollm2"]["spec"]["selector"].items() <= smol_labels.items()
    assert not services["rel-ttc-policy"]["spec"]["selector"].items() <= smol_labels.items()
    target = "smollm2-135m=dns:///rel-ttc-policy-smollm2:50051"
    assert env_of(deployments["rel-ttc-orchestrator"])["TTC_ORCHESTRATOR_POLICY_TARGETS"] == target
    assert env_of(deployments["rel-ttc-gateway"])["TTC_GATEWAY_POLICY_TARGETS"] == target


def test_an_extra_model_overrides_engine_and_resources(render: Renderer) -> None:
    docs = render(
        "default", *SMOL, "policy.extraModels[0].replicas=2", "policy.extraModels[0].resources.limits.memory=4Gi"
    )
    smol = by_kind(docs, "Deployment")["rel-ttc-policy-smollm2"]
    assert smol["spec"]["replicas"] == 2
    assert smol["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"] == "4Gi"


def test_a_bad_extra_model_name_fails_lint(tools: Tools) -> None:
    from tests.deploy.conftest import CHART

    proc = run(
        [
            tools.helm,
            "lint",
            CHART,
            "--set",
            "policy.extraModels[0].name=Qwen_2",
            "--set",
            "policy.extraModels[0].model=m",
        ]
    )
    assert proc.returncode != 0 and "name" in (proc.stdout + proc.stderr)


def test_compose_runs_a_second_policy_under_a_profile(tools: Tools) -> None:
    from tests.deploy.test_compose import compose_config

    assert "policy-second" not in compose_config(tools)["services"]
    env = {"TTC_POLICY_TARGETS": "smollm2-135m=policy-second:50051"}
    proc = run_env(
        [tools.compose, "-f", "docker-compose.yml", "--profile", "multi-model", "config", "--format", "json"], env
    )
    assert proc.returncode == 0, proc.stderr
    services = json.loads(proc.stdout)["services"]
    assert services["policy-second"]["environment"]["TTC_POLICY_MODEL"] == "smollm2-135m"
    assert services["policy-second"]["build"]["target"] == "policy-cpu"
    assert services["orchestrator"]["environment"]["TTC_ORCHESTRATOR_POLICY_TARGETS"] == env["TTC_POLICY_TARGETS"]
    assert services["gateway"]["environment"]["TTC_GATEWAY_POLICY_TARGETS"] == env["TTC_POLICY_TARGETS"]


def run_env(cmd: list, env: dict[str, str]) -> subprocess.CompletedProcess[str]:  # type: ignore[type-arg]
    return subprocess.run(
        [str(c) for c in cmd],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
        env={**os.environ, **env},
    )

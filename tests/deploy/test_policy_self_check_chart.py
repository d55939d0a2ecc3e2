"""The chart surfaces the policy's engine self-check: every policy container (the default one and
each ``policy.extraModels`` entry) is gated by the native gRPC health probes, which never see
SERVING from a policy whose engine failed its check (it logs one line and exits 3), and that
line becomes the container's termination message (``FallbackToLogsOnError``), shown by
``kubectl describe pod`` as well as ``kubectl logs --previous``."""

from __future__ import annotations

from typing import Any

import pytest

from tests.deploy.conftest import VALUES_FILES, Renderer, component_of

SMOL = ("policy.extraModels[0].name=smollm2", "policy.extraModels[0].model=smollm2-135m")


def policy_containers(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        c
        for d in docs
        if d["kind"] == "Deployment" and component_of(d).startswith("policy")
        for c in d["spec"]["template"]["spec"]["containers"]
        if c["name"] == "policy"
    ]


@pytest.mark.parametrize("name", sorted(VALUES_FILES))
def test_policy_probes_are_the_grpc_health_check_and_its_last_line_is_the_termination_message(
    render: Renderer, name: str
) -> None:
    containers = policy_containers(render(name, *SMOL))
    assert len(containers) == 2
    for c in containers:
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert c[probe]["grpc"]["port"] == 50051, probe
        assert c["terminationMessagePolicy"] == "FallbackToLogsOnError"
        env = {e["name"]: e.get("value") for e in c.get("env", [])}
        assert env.get("TTC_POLICY_ENGINE_SELF_CHECK", "true") == "true"  # the chart keeps the default: on

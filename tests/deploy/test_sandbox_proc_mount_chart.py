"""The chart can give the sandbox an unmasked /proc, which bubblewrap's ``--proc /proc`` needs.

The container runtime masks paths under /proc. The kernel refuses a fresh proc mount beneath a
masked one, so the sandbox's self-check fails (compose fixes it with
``systempaths=unconfined``). On Kubernetes the fix is ``procMount: Unmasked``, which the API
server accepts only in a user-namespaced pod (``hostUsers: false``). These tests render the
chart and check four things: the defaults render exactly what the chart rendered before, both
fields appear on the sandbox and nowhere else when set, the rendering is valid Kubernetes 1.31,
and the combination the API server would reject fails ``helm template`` with a message naming
both values.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.deploy.conftest import CHART, VALUES_FILES, Renderer, Tools, by_kind, component_of, run
from tests.deploy.test_helm import KUBERNETES_VERSION

UNMASKED = ("sandbox.procMount=Unmasked", "sandbox.hostUsers=false")
SANDBOX = "rel-ttc-sandbox"


def pod_specs(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Pod spec of every workload, by object name."""
    return {
        d["metadata"]["name"]: d["spec"]["template"]["spec"] for d in docs if d["kind"] in ("Deployment", "StatefulSet")
    }


def others(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every manifest that is not the sandbox's."""
    return [d for d in docs if "labels" not in d["metadata"] or component_of(d) != "sandbox"]


def without_proc_fields(deployment: dict[str, Any]) -> dict[str, Any]:
    """The Deployment with hostUsers and every container's procMount taken out."""
    out = copy.deepcopy(deployment)
    spec = out["spec"]["template"]["spec"]
    spec.pop("hostUsers", None)
    for c in spec["containers"]:
        c["securityContext"].pop("procMount", None)
    return out


@pytest.mark.parametrize("name", sorted(VALUES_FILES))
def test_defaults_render_neither_field_and_spelling_them_out_changes_nothing(render: Renderer, name: str) -> None:
    docs = render(name)
    for workload, spec in pod_specs(docs).items():
        assert "hostUsers" not in spec, workload
        for c in spec["containers"] + spec.get("initContainers", []):
            assert "procMount" not in c.get("securityContext", {}), f"{workload}/{c['name']}"
    # The defaults are Kubernetes' own, so writing them out renders the same manifests.
    assert render(name, "sandbox.procMount=Default", "sandbox.hostUsers=true") == docs


@pytest.mark.parametrize("name", ["default", "gpu"])
def test_unmasked_proc_in_a_user_namespace_changes_the_sandbox_pod_only(render: Renderer, name: str) -> None:
    base = render(name)
    docs = render(name, *UNMASKED)
    sandbox = by_kind(docs, "Deployment")[SANDBOX]
    spec = sandbox["spec"]["template"]["spec"]
    assert spec["hostUsers"] is False
    (container,) = spec["containers"]
    assert container["securityContext"]["procMount"] == "Unmasked"
    # The rest of the sandbox's lock-down stays as it was.
    assert container["securityContext"]["privileged"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    # Only those two fields differ, and only on the sandbox: not even the checksum annotation,
    # since the pod spec carries them itself (so the defaults do not roll pods on an upgrade).
    assert without_proc_fields(sandbox) == by_kind(base, "Deployment")[SANDBOX]
    assert others(docs) == others(base)


def test_a_user_namespace_alone_keeps_the_default_proc_mount(render: Renderer) -> None:
    spec = pod_specs(render("default", "sandbox.hostUsers=false"))[SANDBOX]
    assert spec["hostUsers"] is False
    assert "procMount" not in spec["containers"][0]["securityContext"]


def test_the_unmasked_rendering_is_valid_kubernetes_and_passes_strict_lint(tools: Tools) -> None:
    sets = [arg for s in UNMASKED for arg in ("--set", s)]
    lint = run([tools.helm, "lint", "--strict", CHART, *sets])
    assert lint.returncode == 0, lint.stdout + lint.stderr
    rendered = run([tools.helm, "template", "rel", CHART, *sets])
    assert rendered.returncode == 0, rendered.stderr
    proc = run([tools.kubernetes_validate, "--strict", "-k", KUBERNETES_VERSION, "-"], stdin=rendered.stdout)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert f"passed for resource deployment/{SANDBOX}" in out


@pytest.mark.parametrize("host_users", [None, "true"])
def test_unmasked_without_a_user_namespace_fails_naming_both_values(tools: Tools, host_users: str | None) -> None:
    sets = ["--set", "sandbox.procMount=Unmasked"]
    if host_users is not None:
        sets += ["--set", f"sandbox.hostUsers={host_users}"]
    proc = run([tools.helm, "template", "rel", CHART, *sets])
    assert proc.returncode != 0, "the chart rendered procMount: Unmasked in a pod on the host's user namespace"
    assert "sandbox.procMount: Unmasked needs sandbox.hostUsers: false" in proc.stderr
    assert proc.stdout == ""


def test_unmasked_without_a_user_namespace_is_allowed_while_the_sandbox_is_disabled(render: Renderer) -> None:
    docs = render("default", "sandbox.enabled=false", "sandbox.procMount=Unmasked")
    assert SANDBOX not in pod_specs(docs)


def test_a_user_namespace_refuses_a_sandbox_uid_it_cannot_map(tools: Tools, render: Renderer) -> None:
    proc = run(
        [tools.helm, "template", "rel", CHART, "--set", "sandbox.hostUsers=false", "--set", "sandbox.runAsUser=65536"]
    )
    assert proc.returncode != 0
    assert "sandbox.runAsUser (65536) must be below 65536 with sandbox.hostUsers: false" in proc.stderr
    # The largest uid the pod's namespace maps is accepted, and without a user namespace any uid is.
    assert (
        pod_specs(render("default", "sandbox.hostUsers=false", "sandbox.runAsUser=65535"))[SANDBOX]["hostUsers"]
        is False
    )
    assert pod_specs(render("default", "sandbox.runAsUser=65536"))[SANDBOX]["securityContext"]["runAsUser"] == 65536


def test_the_schema_refuses_an_unknown_proc_mount_naming_the_field(tools: Tools) -> None:
    proc = run([tools.helm, "lint", "--strict", CHART, "--set", "sandbox.procMount=Masked"])
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "sandbox.procMount" in out and "Unmasked" in out

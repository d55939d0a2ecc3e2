"""helm lint --strict, schema-checked values, and rendered manifests against Kubernetes 1.31 schemas."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.deploy.conftest import CHART, ROOT, VALUES_FILES, Tools, helm_args, run

KUBERNETES_VERSION = "1.31.0"


@pytest.mark.parametrize("name", sorted(VALUES_FILES))
def test_helm_lint_strict(tools: Tools, name: str) -> None:
    proc = run([tools.helm, "lint", "--strict", CHART, *helm_args(VALUES_FILES[name])])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 chart(s) failed" in proc.stdout


@pytest.mark.parametrize("name", sorted(VALUES_FILES))
def test_rendered_manifests_validate_against_kubernetes_schemas(tools: Tools, name: str) -> None:
    rendered = run([tools.helm, "template", "rel", CHART, *helm_args(VALUES_FILES[name])])
    assert rendered.returncode == 0, rendered.stderr
    proc = run([tools.kubernetes_validate, "--strict", "-k", KUBERNETES_VERSION, "-"], stdin=rendered.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ERROR" not in proc.stdout + proc.stderr
    # Core kinds must actually be checked, not skipped as unknown.
    for kind in ("deployment", "service", "networkpolicy" if name != "minimal" else "statefulset"):
        assert f"passed for resource {kind}/" in proc.stdout + proc.stderr


def test_kubernetes_validate_rejects_an_invalid_manifest(tools: Tools) -> None:
    """The validator itself must be able to fail (strict mode rejects unknown fields)."""
    bad = yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "x"},
            "spec": {"ports": [{"port": 80}], "selectr": {"a": "b"}},
        }
    )
    proc = run([tools.kubernetes_validate, "--strict", "-k", KUBERNETES_VERSION, "-"], stdin=bad)
    assert proc.returncode != 0
    assert "selectr" in proc.stdout + proc.stderr


def test_values_schema_is_generated_from_the_description() -> None:
    proc = run(["python", ROOT / "scripts" / "helm_schema.py", "--check"])
    assert proc.returncode == 0, proc.stderr


def _lint_with(tools: Tools, tmp_path: Path, override: dict[str, object]) -> str:
    values = tmp_path / "bad-values.yaml"
    values.write_text(yaml.safe_dump(override))
    proc = run([tools.helm, "lint", "--strict", CHART, "-f", values])
    assert proc.returncode != 0, f"helm lint accepted {override}"
    return proc.stdout + proc.stderr


def test_wrong_type_fails_lint_naming_the_field(tools: Tools, tmp_path: Path) -> None:
    out = _lint_with(tools, tmp_path, {"orchestrator": {"replicas": "three"}})
    assert "orchestrator.replicas" in out
    assert "integer" in out


def test_missing_required_field_fails_lint_naming_the_field(tools: Tools, tmp_path: Path) -> None:
    # A user values file cannot delete a key, so the schema is checked on a copy of the chart
    # whose values.yaml lacks one, as a broken fork or a bad --reuse-values upgrade would.
    chart = tmp_path / "ttc"
    proc = run(["cp", "-r", CHART, chart])
    assert proc.returncode == 0, proc.stderr
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    del values["sandbox"]["image"]["repository"]
    (chart / "values.yaml").write_text(yaml.safe_dump(values))
    proc = run([tools.helm, "lint", "--strict", chart])
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "sandbox.image" in out
    assert "repository" in out and "required" in out


def test_null_required_field_fails_lint_naming_the_field(tools: Tools, tmp_path: Path) -> None:
    out = _lint_with(tools, tmp_path, {"policy": {"engine": "tensorrt"}})
    assert "policy.engine" in out


def test_misspelt_key_fails_lint(tools: Tools, tmp_path: Path) -> None:
    out = _lint_with(tools, tmp_path, {"gateway": {"replica": 3}})
    assert "replica" in out
    assert "Additional property" in out or "additional" in out.lower()


def test_tensor_parallel_larger_than_gpus_fails_rendering(tools: Tools) -> None:
    proc = run(
        [
            tools.helm, "template", "rel", CHART, "-f", CHART / "values-gpu.yaml",
            "--set", "policy.gpus=2", "--set", "policy.vllm.tensorParallelSize=4",
        ]
    )  # fmt: skip
    assert proc.returncode != 0
    assert "policy.vllm.tensorParallelSize (4) exceeds policy.gpus (2)" in proc.stderr


def test_external_redis_requires_its_url(tools: Tools) -> None:
    proc = run([tools.helm, "template", "rel", CHART, "--set", "redis.enabled=false"])
    assert proc.returncode != 0
    assert "redis.externalUrl" in proc.stderr
    ok = run(
        [
            tools.helm,
            "template",
            "rel",
            CHART,
            "--set",
            "redis.enabled=false",
            "--set",
            "redis.externalUrl=redis://r:6379/0",
        ]
    )
    assert ok.returncode == 0, ok.stderr
    assert "redis://r:6379/0" in ok.stdout


def _render_notes(tools: Tools, tmp_path: Path, *sets: str) -> str:
    """NOTES.txt as `helm install` prints it (install --dry-run needs a cluster; this does not).

    A copy of the chart renders the notes through ``tpl`` into a ConfigMap, so they are
    evaluated with the same helpers and values as a real install.
    """
    chart = tmp_path / "ttc"
    assert run(["cp", "-r", CHART, chart]).returncode == 0
    (chart / "files" / "NOTES.txt").write_text((CHART / "templates" / "NOTES.txt").read_text())
    (chart / "templates" / "notes-under-test.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\n"
        'data:\n  notes: {{ tpl (.Files.Get "files/NOTES.txt") . | quote }}\n'
    )
    proc = run(
        [tools.helm, "template", "rel", chart, "--namespace", "ttc", "--show-only", "templates/notes-under-test.yaml",
         *helm_args(None, sets)]
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return str(yaml.safe_load(proc.stdout)["data"]["notes"])


def test_notes_tell_how_to_call_the_gateway(tools: Tools, tmp_path: Path) -> None:
    notes = _render_notes(tools, tmp_path)
    assert "kubectl -n ttc port-forward svc/rel-ttc-gateway 8000:80" in notes
    assert "curl -s http://127.0.0.1:8000/v1/chat/completions" in notes
    assert 'OpenAI(base_url="http://127.0.0.1:8000/v1"' in notes
    assert '"model": "qwen2.5-coder-0.5b", "reasoning_effort": "medium"' in notes
    assert "accepts requests without a key" in notes
    assert "Authorization: Bearer" not in notes


def test_notes_with_api_keys_show_the_header(tools: Tools, tmp_path: Path) -> None:
    notes = _render_notes(tools, tmp_path, "gateway.apiKeys.existingSecret=keys", "keda.enabled=true")
    assert "Authorization: Bearer $TTC_API_KEY" in notes
    assert "accepts requests without a key" not in notes
    assert "scale on CPU only" not in notes

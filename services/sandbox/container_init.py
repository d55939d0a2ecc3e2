"""PID 1 of every sandbox container: unpack one execution, run it under rlimits, report.

The docker backend runs this file's source as ``python3 -I -S -c <source>`` inside the
container (standard library only, nothing imported from the project there). It reads one
*bundle* from stdin (the program, its files and its stdin, framed by a JSON header), writes
the files into the tmpfs working directory, and forks the program as its only child with the
request's rlimits, its stdin from a memfd and nothing else open. When the child ends it kills
every process the execution left (same uid, so ``kill(-1)`` reaches all of them) and writes a
status record to stderr, tagged with a nonce only the service knows: the exit code (128+N for
signal N, as bwrap reports it), CPU time and peak RSS from ``wait4``, and the container's
memory-cgroup OOM-kill count. It marks itself non-dumpable, so the program (same uid) cannot
read its memory, environment or descriptors through ``/proc/1``.

The service side (``encode_bundle``, ``split_status``) lives here too, so the format has one
definition.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import struct
import sys
import time
from collections.abc import Mapping, Sequence

STATUS_TAG = b"\x1eTTC-STATUS "
_HEADER = struct.Struct(">I")


def encode_bundle(
    *,
    nonce: str,
    program_name: str,
    program: bytes,
    files: Sequence[tuple[str, bytes]],
    stdin: bytes,
    argv: Sequence[str],
    env: Mapping[str, str],
    rlimits: Mapping[str, tuple[int, int]],
) -> bytes:
    """Everything one execution needs, as the bytes the container reads from its stdin."""
    blobs = [(program_name, program), *files]
    header = {
        "nonce": nonce,
        "files": [[path, len(content)] for path, content in blobs],
        "stdin": len(stdin),
        "argv": list(argv),
        "env": dict(env),
        "rlimits": {name: list(pair) for name, pair in rlimits.items()},
    }
    encoded = json.dumps(header).encode()
    return b"".join([_HEADER.pack(len(encoded)), encoded, *(content for _, content in blobs), stdin])


def split_status(stderr: bytes, nonce: str) -> tuple[bytes, dict[str, object] | None]:
    """The program's own stderr and the init's status record (None when there is none)."""
    tag = STATUS_TAG + nonce.encode() + b" "
    at = stderr.rfind(tag)
    if at < 0:
        return stderr, None
    line = stderr[at + len(tag) :].split(b"\n", 1)[0]
    try:
        status = json.loads(line)
    except ValueError:
        return stderr, None
    return stderr[:at], status if isinstance(status, dict) else None


# ---- everything below runs inside the container ----------------------------------------------


def _read_exactly(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    while size > 0:
        data = os.read(fd, min(size, 1 << 20))
        if not data:
            raise EOFError("bundle ended early")
        chunks.append(data)
        size -= len(data)
    return b"".join(chunks)


def _write_file(workdir: str, path: str, content: bytes) -> None:
    target = os.path.join(workdir, path)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        view = memoryview(content)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def _oom_kills() -> int:
    """OOM kills in this container's memory cgroup (v1 memory.oom_control, v2 memory.events)."""
    for path in ("/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events"):
        try:
            with open(path) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            continue
    return 0


def _cgroup_cpu_seconds() -> float | None:
    """CPU time of this container's whole tree so far (v1 cpuacct.usage, v2 cpu.stat), exact."""
    try:
        with open("/sys/fs/cgroup/cpuacct/cpuacct.usage") as f:
            return int(f.read()) / 1e9
    except (OSError, ValueError):
        pass
    try:
        with open("/sys/fs/cgroup/cpu.stat") as f:
            for line in f:
                key, _, value = line.partition(" ")
                if key == "usage_usec":
                    return int(value) / 1e6
    except (OSError, ValueError):
        pass
    return None


def _cpu_seconds(usage: object) -> float:
    """The execution's CPU time: the cgroup's total less this init's own, else the child's rusage.

    The rusage of ``wait4`` is tick-sampled (a program stopped by RLIMIT_CPU at 1 s may show
    0.96 s) and misses processes nobody waited for; the cgroup counts every one exactly.
    """
    import resource

    total = _cgroup_cpu_seconds()
    child = float(usage.ru_utime + usage.ru_stime)  # type: ignore[attr-defined]
    if total is None:
        return child
    try:  # this init's own time, as exactly as the cgroup counts it
        with open("/proc/self/schedstat") as f:
            mine = int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        own = resource.getrusage(resource.RUSAGE_SELF)
        mine = own.ru_utime + own.ru_stime
    return max(child, total - mine)


# A seccomp filter the init adds on top of the runtime's default profile (filters stack; the
# strictest answer wins): no new namespaces and no mounts, as bubblewrap's --disable-userns and
# read-only view give. Docker's default profile already refuses these to a process without
# CAP_SYS_ADMIN; podman's allows user namespaces, from which the others follow.
_ARCH_SYSCALLS = {
    # AUDIT_ARCH: (unshare, setns, mount, umount2, pivot_root, open_tree..mount_setattr), clone, clone3
    0xC000003E: ((272, 308, 165, 166, 155, 428, 429, 430, 431, 432, 433, 442), 56, 435),  # x86_64
    0xC00000B7: ((97, 268, 40, 39, 41, 428, 429, 430, 431, 432, 433, 442), 220, 435),  # aarch64
}
_CLONE_NAMESPACES = 0x7E020080  # CLONE_NEW{NS,CGROUP,UTS,IPC,USER,PID,NET,TIME}
_EPERM, _ENOSYS = 1, 38


def namespace_filter(arch: int) -> list[tuple[int, int, int, int]]:
    """The BPF program (code, jt, jf, k) for ``arch``: EPERM for namespace and mount calls,
    ENOSYS for clone3 (its flags are out of reach, libc falls back to clone), clone only
    without namespace flags; a foreign architecture or an x32 call is refused outright."""
    ld, jeq, jset, jge, ret = 0x20, 0x15, 0x45, 0x35, 0x06
    allow, errno = 0x7FFF0000, 0x00050000
    denied, clone, clone3 = _ARCH_SYSCALLS[arch]
    prog = [(ld, 0, 0, 4), (jeq, 1, 0, arch), (ret, 0, 0, errno | _EPERM), (ld, 0, 0, 0)]
    prog += [(jge, 0, 1, 0x40000000), (ret, 0, 0, errno | _EPERM)]
    for nr in denied:
        prog += [(jeq, 0, 1, nr), (ret, 0, 0, errno | _EPERM)]
    prog += [(jeq, 0, 1, clone3), (ret, 0, 0, errno | _ENOSYS)]
    prog += [(jeq, 1, 0, clone), (ret, 0, 0, allow)]
    prog += [(ld, 0, 0, 16), (jset, 0, 1, _CLONE_NAMESPACES), (ret, 0, 0, errno | _EPERM), (ret, 0, 0, allow)]
    return prog


def install_namespace_filter() -> None:
    """Add ``namespace_filter`` to the calling process (needs no privilege: no_new_privs is set)."""
    import ctypes

    machine = os.uname().machine
    arch = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}.get(machine)
    if arch is None:
        raise OSError(f"no seccomp filter for {machine}: refusing to run without one")
    prog = namespace_filter(arch)

    class SockFilter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]

    filters = (SockFilter * len(prog))(*(SockFilter(*insn) for insn in prog))
    fprog = SockFprog(len(prog), filters)
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_no_new_privs, pr_set_seccomp, seccomp_mode_filter = 38, 22, 2
    if libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
    if libc.prctl(pr_set_seccomp, seccomp_mode_filter, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_SECCOMP")


def _not_dumpable() -> None:
    import ctypes

    pr_set_dumpable = 4
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_dumpable, 0, 0, 0, 0)


def _child(header: dict[str, object], stdin_fd: int) -> None:
    """In the forked child: limits, clean descriptors and signals, then exec the program."""
    import resource

    try:
        os.dup2(stdin_fd, 0)
        os.closerange(3, 1 << 16)
        for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
        rlimits = header["rlimits"]
        assert isinstance(rlimits, dict)
        for name, (soft, hard) in rlimits.items():
            resource.setrlimit(getattr(resource, name), (soft, hard))
        install_namespace_filter()
        argv = [str(a) for a in header["argv"]]  # type: ignore[attr-defined]
        env = {str(k): str(v) for k, v in header["env"].items()}  # type: ignore[attr-defined]
        os.execve(argv[0], argv, env)
    except BaseException as exc:  # report anything, never return into the parent's code
        os.write(2, f"sandbox init: cannot start the program: {exc!r}\n".encode())
    os._exit(127)


def _reap_all(deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.005)


def main() -> None:
    _not_dumpable()
    (size,) = _HEADER.unpack(_read_exactly(0, _HEADER.size))
    header = json.loads(_read_exactly(0, size))
    nonce = str(header["nonce"])
    workdir = os.getcwd()
    for path, length in header["files"]:
        _write_file(workdir, str(path), _read_exactly(0, int(length)))
    stdin_fd = os.memfd_create("stdin")
    data = memoryview(_read_exactly(0, int(header["stdin"])))
    while data:
        data = data[os.write(stdin_fd, data) :]
    os.lseek(stdin_fd, 0, os.SEEK_SET)
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        _child(header, stdin_fd)
    os.close(stdin_fd)
    while True:
        try:
            _, status, usage = os.wait4(pid, 0)
            break
        except InterruptedError:
            continue
    # The execution is over: nothing it started may outlive it (PID 1's exit would kill them
    # too, but then their output could still follow the status record).
    with contextlib.suppress(OSError):
        os.kill(-1, signal.SIGKILL)
    _reap_all(time.monotonic() + 2.0)
    code = 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.waitstatus_to_exitcode(status)
    record = {
        "exit-code": code,
        "cpu-seconds": _cpu_seconds(usage),
        "peak-memory-bytes": usage.ru_maxrss * 1024,
        "oom-kills": _oom_kills(),
    }
    os.write(2, STATUS_TAG + nonce.encode() + b" " + json.dumps(record).encode() + b"\n")


if __name__ == "__main__":
    main()

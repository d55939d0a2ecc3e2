"""The bubblewrap command line of one execution, and the interpreter's read-only view.

Everything an execution can see is named here: the interpreter and the directories it
loads from (read-only), a fresh ``/proc`` of its own PID namespace, a minimal ``/dev``, and a
size-limited tmpfs at ``/tmp`` that is its working directory. No network (a new, empty net
namespace), no host processes, no environment but the few variables set below, nothing of
``/etc``, ``/root`` or the project. Resource limits are set by ``prlimit`` just before
``bwrap`` runs, so they apply to every process inside. Building the command is pure; only
``probe_interpreter`` touches the system.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from services.sandbox.limits import ExecLimits

WORKDIR = "/tmp"
SANDBOX_ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": WORKDIR,
    "TMPDIR": WORKDIR,
    "LANG": "C.UTF-8",
    "PYTHONIOENCODING": "utf-8",
}
_PROBE = (
    "import json, os, sys, sysconfig; "
    "print(json.dumps({'executable': os.path.realpath(sys.executable), "
    "'path': [p for p in sys.path if p and os.path.isdir(p)], "
    "'multiarch': sysconfig.get_config_var('MULTIARCH') or '', "
    "'libdir': sysconfig.get_config_var('LIBDIR') or ''}))"
)
_SITE_DIRS = ("site-packages", "dist-packages")


@dataclass(frozen=True)
class Interpreter:
    """An interpreter and the host paths it needs, bound read-only at the same place."""

    executable: str
    ro_paths: tuple[str, ...]


@dataclass(frozen=True)
class MountedFile:
    """A file copied into the working directory from an open descriptor (a memfd)."""

    fd: int
    path: str  # relative to WORKDIR, already validated


def _covered(path: str, roots: Sequence[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def shared_lib_paths(multiarch: str) -> list[str]:
    """The directories of the shared libraries an interpreter and its extension modules load.

    Only the multiarch library directory (``/usr/lib/x86_64-linux-gnu``: libc, libm, libssl,
    libffi, ...) and the dynamic loader's ``/usr/lib64``, not the rest of ``/usr/lib`` (other
    languages, system Python packages, tools' data).
    """
    found: list[str] = []
    candidates = [f"/usr/lib/{multiarch}", f"/lib/{multiarch}"] if multiarch else []
    for path in [*candidates, "/usr/lib64", "/lib64"]:
        real = os.path.realpath(path)
        if os.path.isdir(real) and real not in found:
            found.append(real)
    if not candidates:  # no multiarch layout: fall back to the whole library directories
        found = [p for p in ("/usr/lib", "/lib") if os.path.isdir(p)] + found
    return found


def probe_interpreter(python_path: str, *, site_packages: bool = False, timeout: float = 30.0) -> Interpreter:
    """Ask the interpreter where it loads from; raises ``RuntimeError`` with the reason if it cannot run.

    The view is the interpreter binary, its standard library (``sys.path`` without
    site/dist-packages unless ``site_packages``), ``libpython`` when it lives apart, and the
    shared-library directories.
    """
    if not os.path.isfile(python_path):
        raise RuntimeError(f"interpreter {python_path!r} does not exist")
    proc = subprocess.run(
        [python_path, "-E", "-s", "-c", _PROBE], capture_output=True, timeout=timeout, env={}, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"interpreter {python_path!r} failed: {proc.stderr.decode(errors='replace')[-500:]}")
    info = json.loads(proc.stdout)
    paths: list[str] = shared_lib_paths(info["multiarch"])
    libpython = sorted(glob.glob(os.path.join(info["libdir"], "libpython*.so*"))) if info["libdir"] else []
    for candidate in [info["executable"], *libpython, *info["path"]]:
        real = os.path.realpath(candidate)
        if not site_packages and os.path.basename(real.rstrip("/")) in _SITE_DIRS:
            continue
        if os.path.exists(real) and not _covered(real, paths):
            paths.append(real)
    return Interpreter(executable=info["executable"], ro_paths=tuple(paths))


def setpriv_args(setpriv_path: str, uid: int | None) -> list[str]:
    """Switch to the slot's uid and gid with no supplementary groups (nothing when ``uid`` is None).

    Done by exec'ing ``setpriv`` rather than by ``Popen(user=...)``: that would make Python
    fork() instead of vfork(), and fork handlers of the threaded gRPC runtime then crash the
    child now and then before it can exec.
    """
    if uid is None:
        return []
    return [setpriv_path, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]


def prlimit_args(prlimit_path: str, limits: ExecLimits, *, tmpfs_bytes: int, max_open_files: int) -> list[str]:
    """``prlimit`` options: CPU (SIGXCPU then SIGKILL), address space, file size, fds, no core.

    The process limit is not among them: see ``program_argv``.
    """
    cpu_soft, cpu_hard = limits.cpu_rlimit
    return [
        prlimit_path,
        f"--cpu={cpu_soft}:{cpu_hard}",
        f"--as={limits.memory_bytes}",
        f"--fsize={tmpfs_bytes}",
        f"--nofile={max_open_files}",
        "--core=0",
        "--",
    ]


def _root_links() -> list[str]:
    """Recreate ``/lib``, ``/lib64`` and ``/bin`` as on the host (symlinks on merged-/usr systems)."""
    args: list[str] = []
    for top in ("/lib", "/lib64", "/bin"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top) and top != "/bin":
            args += ["--ro-bind", top, top]
    return args


def bwrap_args(
    bwrap_path: str,
    interpreter: Interpreter,
    *,
    tmpfs_bytes: int,
    files: Sequence[MountedFile],
    status_fd: int,
    argv: Sequence[str],
    block_fd: int | None = None,
    tools: Sequence[str] = (),
) -> list[str]:
    """The ``bwrap`` command: fresh namespaces, read-only interpreter, private tmpfs, clean env."""
    args = [
        bwrap_path,
        "--unshare-all",  # user, ipc, pid, net (empty: no interfaces but lo), uts, cgroup
        "--unshare-user",
        "--disable-userns",  # no nested user namespaces: less kernel surface for the program
        "--cap-drop",
        "ALL",
        "--die-with-parent",
        # The program is PID 1 of its namespace: when it exits the kernel kills everything it
        # left behind, and the monitor reaps it directly, so wait4 sees its CPU time and RSS.
        "--as-pid-1",
        "--new-session",
        "--hostname",
        "sandbox",
        "--clearenv",
    ]
    for key, value in SANDBOX_ENV.items():
        args += ["--setenv", key, value]
    for path in (*interpreter.ro_paths, *tools):
        args += ["--ro-bind", path, path]
    args += _root_links()
    args += ["--proc", "/proc", "--dev", "/dev"]
    args += ["--size", str(tmpfs_bytes), "--tmpfs", WORKDIR]
    # POSIX semaphores and shared memory (multiprocessing) need a writable /dev/shm.
    args += ["--size", str(tmpfs_bytes), "--tmpfs", "/dev/shm"]
    for f in files:
        args += ["--perms", "0644", "--file", str(f.fd), f"{WORKDIR}/{f.path}"]
    # bwrap builds "/" and "/dev" as tmpfs with no size limit: make them read-only, so the
    # size-limited /tmp is the only writable place (device nodes like /dev/null still work).
    args += ["--remount-ro", "/dev", "--remount-ro", "/"]
    args += ["--chdir", WORKDIR, "--json-status-fd", str(status_fd)]
    if block_fd is not None:
        args += ["--block-fd", str(block_fd)]  # the program waits until the service lets it go
    args += ["--", *argv]
    return args


def program_argv(interpreter: Interpreter, program: str, *, prlimit_path: str, max_processes: int) -> list[str]:
    """The command inside the sandbox: set RLIMIT_NPROC, then run ``program`` with the interpreter.

    RLIMIT_NPROC is set *inside* the new user namespace on purpose. The kernel counts processes
    per user namespace and uid, and checks every ancestor namespace against the limit its
    creator had when creating it. Set before bwrap, the limit would also be checked against all
    processes of the uid on the host (the service's own threads included, when not root); set
    here, after the namespace exists, it counts exactly this execution's processes.
    Python ignores PYTHON* variables (-E) and the user site (-s) and writes no .pyc (-B).
    """
    return [prlimit_path, f"--nproc={max_processes}", "--", interpreter.executable, "-E", "-s", "-B", program]

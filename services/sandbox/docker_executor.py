"""One execution in a fresh container through the Docker API (docker or podman's service).

Create (labelled, with the limits of ``container_spec``), attach to its stdio, start, send the
bundle, read the multiplexed output under the caps and the wall clock, and classify what the
container's init reported with the same rules as the bubblewrap backend (``outcome.classify``),
so both backends answer the same request with the same status. The container removes itself
when it exits (``AutoRemove``); one killed or abandoned on an error path is removed here, and
anything a crash leaves behind is the sweeper's (``docker_backend``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import signal
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

from services.gen.ttc.v1 import sandbox_pb2
from services.sandbox.container_init import encode_bundle, split_status
from services.sandbox.container_spec import ContainerConfig, FrameDecoder, create_options, program_argv, rlimits
from services.sandbox.executor import Program
from services.sandbox.isolation import SANDBOX_ENV
from services.sandbox.limits import ExecLimits
from services.sandbox.outcome import run_outcome
from services.sandbox.runner import RawRun
from services.sandbox.validation import PROGRAM_NAME

log = logging.getLogger(__name__)
T = TypeVar("T")

_DRAIN_SECONDS = 5.0  # after a kill, how long the attach stream may take to end
_STATUS_ROOM = 4096  # stderr beyond the cap that may still be the init's status record
_READ_CHUNK = 65536


class _Capped:
    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.data = bytearray()
        self.over = False

    def add(self, payload: bytes) -> bool:
        """Keep at most ``cap`` bytes; True the first time more arrived."""
        room = self.cap - len(self.data)
        self.data += payload[: max(room, 0)]
        if len(payload) > room and not self.over:
            self.over = True
            return True
        return False


class DockerExecutor:
    """Runs programs in per-execution containers; holds the API client and configuration only."""

    def __init__(
        self,
        api: Any,
        config: ContainerConfig,
        *,
        max_concurrency: int,
        on_kill: Callable[[str], None] = lambda reason: None,
    ) -> None:
        self.api = api
        self.config = config
        self.on_kill = on_kill
        # The SDK blocks; every slot may hold a few calls at once (run, kill, remove).
        self.threads = ThreadPoolExecutor(max_workers=3 * max_concurrency + 2, thread_name_prefix="docker-api")

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run one blocking SDK call off the event loop."""
        return await asyncio.get_running_loop().run_in_executor(self.threads, partial(fn, *args, **kwargs))

    async def run(self, program: Program, limits: ExecLimits, uid: int | None) -> tuple[sandbox_pb2.RunOutcome, str]:
        """Run ``program`` under ``limits`` as ``uid`` in a new container: its outcome and, when not OK, why."""
        nonce = secrets.token_hex(16)
        bundle = encode_bundle(
            nonce=nonce,
            program_name=PROGRAM_NAME,
            program=program.source,
            files=program.files,
            stdin=program.stdin,
            argv=program_argv(self.config.python, PROGRAM_NAME),
            env=SANDBOX_ENV,
            rlimits=rlimits(limits, tmpfs_bytes=self.config.tmpfs_bytes, max_open_files=self.config.max_open_files),
        )
        raw = RawRun()
        container = ""
        sock: socket.socket | None = None
        done = False
        try:
            created = await self.call(self.api.create_container, **create_options(self.config, limits, uid))
            container = str(created["Id"])
            attached = await self.call(
                self.api.attach_socket, container, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
            sock = getattr(attached, "_sock", attached)
            assert sock is not None
            start = time.perf_counter()
            await self.call(self.api.start, container)
            await self._stream(container, sock, bundle, limits, raw, nonce)
            raw.wall_seconds = time.perf_counter() - start
            done = True
        except asyncio.CancelledError:
            if container:
                self._killed(raw, "cancelled")
            raise
        except Exception as exc:  # the SDK raises docker.errors.*, requests.* and OSError
            raw.spawn_error = f"container runtime error: {type(exc).__name__}: {exc}"
        finally:
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.close()
            if container and not done:
                # Shielded: a cancelled call still removes its container (AutoRemove needs an exit).
                await asyncio.shield(self._remove(container))
        return run_outcome(raw, limits)

    def _killed(self, raw: RawRun, reason: str) -> None:
        if not raw.killed:
            raw.killed = True
            self.on_kill(reason)

    async def _kill(self, container: str, raw: RawRun, reason: str) -> None:
        self._killed(raw, reason)
        with contextlib.suppress(Exception):  # already gone: nothing left to kill
            await self.call(self.api.kill, container, signal="SIGKILL")

    async def _remove(self, container: str) -> None:
        with contextlib.suppress(Exception):  # already removed (AutoRemove) or the runtime is gone
            await self.call(self.api.remove_container, container, force=True)

    async def _stream(
        self, container: str, sock: socket.socket, bundle: bytes, limits: ExecLimits, raw: RawRun, nonce: str
    ) -> None:
        loop = asyncio.get_running_loop()
        sock.setblocking(False)
        out, err = _Capped(limits.max_output_bytes), _Capped(limits.max_output_bytes + _STATUS_ROOM)
        decoder = FrameDecoder()
        kills: list[asyncio.Task[None]] = []

        async def send() -> None:
            with contextlib.suppress(OSError):  # the container may end before reading it all
                await loop.sock_sendall(sock, bundle)

        async def pump() -> None:
            while True:
                data = await loop.sock_recv(sock, _READ_CHUNK)
                if not data:
                    return
                for stream, payload in decoder.feed(data):
                    overflowed = (out if stream == 1 else err).add(payload)
                    if overflowed and not raw.output_exceeded:
                        raw.output_exceeded = True
                        kills.append(asyncio.create_task(self._kill(container, raw, "output_limit")))

        sending = asyncio.create_task(send())
        pumping = asyncio.create_task(pump())
        try:
            try:
                await asyncio.wait_for(asyncio.shield(pumping), timeout=limits.wall_seconds)
            except TimeoutError:
                raw.timed_out = True
                await self._kill(container, raw, "timeout")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(pumping), timeout=_DRAIN_SECONDS)
        finally:
            for task in (pumping, sending):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, OSError):
                    await task
            if kills:
                await asyncio.gather(*kills)
        self._collect(raw, bytes(out.data), out.over, bytes(err.data), limits, nonce)

    @staticmethod
    def _collect(raw: RawRun, stdout: bytes, stdout_over: bool, stderr: bytes, limits: ExecLimits, nonce: str) -> None:
        """Fill ``raw`` from the streams and the init's status record (pure)."""
        program_stderr, status = split_status(stderr, nonce)
        cap = limits.max_output_bytes
        raw.stdout, raw.stdout_truncated = stdout, stdout_over
        raw.stderr, raw.stderr_truncated = program_stderr[:cap], len(program_stderr) > cap
        if raw.stdout_truncated or raw.stderr_truncated:
            raw.output_exceeded = True
        if status is not None:
            raw.sandbox_started = True
            code = status.get("exit-code")
            raw.bwrap_exit_code = code if isinstance(code, int) else None
            raw.cpu_seconds = float(status.get("cpu-seconds", 0.0))  # type: ignore[arg-type]
            raw.peak_memory_bytes = int(status.get("peak-memory-bytes", 0))  # type: ignore[call-overload]
            raw.oom_killed = int(status.get("oom-kills", 0)) > 0  # type: ignore[call-overload]
        elif raw.killed:
            raw.sandbox_started = True  # killed by the service: report it as bwrap's killed tree
            raw.wait_status = signal.SIGKILL
        else:
            raw.wait_status = 1 << 8  # the init failed before reporting: setup failure (stderr says why)

    def close(self) -> None:
        self.threads.shutdown(wait=False, cancel_futures=True)

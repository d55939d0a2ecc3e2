"""An executor that runs programs in a local interpreter, as the sandbox would (minus the
isolation): for tests whose programs are their own trusted code, so what is tested is the
program the sandbox would run, not a fake of it."""

from __future__ import annotations

import asyncio
import sys

from services.search.interfaces import ProgramRun


class LocalExecutor:
    """Runs each program with ``python -I -c`` and keeps what it was asked to run."""

    def __init__(self) -> None:
        self.runs: list[str] = []

    async def run(self, code: str, *, wall_seconds: float) -> ProgramRun:
        self.runs.append(code)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-I", "-c", code, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), wall_seconds)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            return ProgramRun("timeout", wall_seconds=wall_seconds)
        status = "ok" if proc.returncode == 0 else "runtime_error"
        return ProgramRun(status, out.decode(), err.decode(), proc.returncode or 0, wall_seconds=0.05)  # type: ignore[arg-type]

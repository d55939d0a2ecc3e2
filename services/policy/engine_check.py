"""The policy's start-up self-check: a child process decodes a few tokens before the policy serves.

Why a child: a llama.cpp library compiled for another CPU (a native build carrying AMX tile
instructions, say) loads a model fine and dies only at its first decode, by a signal no Python
code can catch. In the service process that death comes with the first request, after the
health check said SERVING, and the log ends at ``serving``. So before the service loads its
engine, ``python -m services.policy.engine_check`` — the same interpreter, library, settings
and model, inheriting the service's environment — loads the engine with a small KV cache and
greedily decodes ``CHECK_TOKENS`` tokens of one short chat prompt (a prompt evaluation and
single-token decodes: the kernels a request runs). If the child dies by a signal, fails or
outlives ``TTC_POLICY_ENGINE_SELF_CHECK_TIMEOUT_S``, ``check_engine`` raises ``EngineBroken``
whose message is one line naming the cause and its remedy; the server logs it and exits with
``EXIT_ENGINE_BROKEN`` without ever reporting SERVING.

Only llama.cpp is checked (``CHECKED_ENGINES``): vLLM already runs its model in an engine-core
child process, whose death fails the policy's start with vLLM's own error instead of killing
the policy; the remote ``openai`` engine has no local library to check.

Fault injection, for tests only: ``TTC_POLICY_SELF_CHECK_FAULT=SIGILL`` (any signal name) makes
the child kill itself with that signal once its engine is loaded, where the first decode would
run. Only the child's ``main`` reads it; it is not a setting, and the service never acts on it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import resource
import signal
import sys
import time
from dataclasses import dataclass

from services.common.exit_status import describe_exit, signal_label
from services.policy.settings import PolicySettings

log = logging.getLogger(__name__)

CHECKED_ENGINES = frozenset({"llamacpp"})
CHECK_TOKENS = 4
#: the child's KV cache: the prompt and its few tokens fit many times over
CHECK_KV_TOKENS = 512
#: exit status of a policy that refused to start on a broken engine (the sandbox's refusal is 2)
EXIT_ENGINE_BROKEN = 3
FAULT_ENV = "TTC_POLICY_SELF_CHECK_FAULT"
REBUILD = "rm .venv/.engine-portable && make install, or rebuild the image (docs/policy-engines.md)"
REMEDIES: dict[int, str] = {
    signal.SIGILL: "the llama.cpp library was compiled for another CPU (a native build); "
    f"rebuild it portably: {REBUILD}",
    signal.SIGSEGV: "llama.cpp crashed: a corrupt model file or a broken llama-cpp-python build; "
    f"prepare the model again (python -m services.policy.models prepare) or rebuild: {REBUILD}",
    signal.SIGBUS: "the model file could not be read through its memory map (truncated or on a failing "
    "disk); prepare it again (python -m services.policy.models prepare)",
    signal.SIGKILL: "killed from outside, most often by the kernel's out-of-memory killer; "
    "give the policy more memory or choose a smaller model",
    signal.SIGABRT: "llama.cpp aborted (a failed GGML_ASSERT; see its last output)",
}


class EngineBroken(Exception):
    """The engine failed its self-check; ``str()`` is the one log line (cause and remedy)."""


@dataclass(frozen=True)
class CheckOutcome:
    """What the child did: its return code (``None`` when it timed out), its last line of stderr,
    and the tokens it decoded."""

    returncode: int | None
    last_output: str
    seconds: float
    timeout_s: float
    tokens: int = 0


def should_check(settings: PolicySettings) -> bool:
    return settings.engine_self_check and settings.engine in CHECKED_ENGINES


def failure_message(outcome: CheckOutcome, model: str) -> str | None:
    """The one line for a failed check, or ``None`` when the child decoded and exited 0."""
    code = outcome.returncode
    if code == 0:
        return None
    tail = f"; last output: {outcome.last_output}" if outcome.last_output else ""
    if code is None:
        cause = (
            f"engine self-check did not finish within {outcome.timeout_s:g}s: the engine hangs or the machine "
            "is overloaded; raise TTC_POLICY_ENGINE_SELF_CHECK_TIMEOUT_S"
        )
    elif code < 0:
        remedy = REMEDIES.get(-code, "the engine crashed at its first decode")
        cause = f"engine self-check died with {signal_label(-code)}: {remedy}"
    else:
        cause = f"engine self-check failed ({describe_exit(code)}): the engine could not load or decode"
    return f"{cause} (model {model}, {outcome.seconds:.1f}s){tail}"


def last_line(stderr: bytes) -> str:
    lines = [line.strip() for line in stderr.decode(errors="replace").splitlines() if line.strip()]
    return lines[-1][:500] if lines else ""


async def run_child(timeout_s: float) -> CheckOutcome:
    """Run the child check (this interpreter, this environment) and wait at most ``timeout_s``."""
    start = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "services.policy.engine_check",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        stdout, stderr = await asyncio.wait_for(proc.communicate(), timeout_s)
    except TimeoutError:
        proc.kill()
        _, stderr = await proc.communicate()
        return CheckOutcome(None, last_line(stderr), time.monotonic() - start, timeout_s)
    finally:
        if proc.returncode is None:  # cancelled: leave no child decoding behind
            proc.kill()
            await proc.wait()
    seconds = time.monotonic() - start
    tokens = int(json.loads(stdout.splitlines()[-1])["tokens"]) if proc.returncode == 0 else 0
    return CheckOutcome(proc.returncode, last_line(stderr), seconds, timeout_s, tokens)


async def check_engine(settings: PolicySettings) -> None:
    """Decode a few tokens in a child process; raise ``EngineBroken`` if it does not survive."""
    outcome = await run_child(settings.engine_self_check_timeout_s)
    message = failure_message(outcome, settings.model)
    if message is not None:
        raise EngineBroken(message)
    log.info(f"engine self-check passed: {outcome.tokens} tokens decoded in {outcome.seconds:.1f}s")


def child_settings(settings: PolicySettings) -> PolicySettings:
    """The service's settings with a KV cache just big enough for the check, one request."""
    small = min(CHECK_KV_TOKENS, settings.n_ctx)
    return settings.model_copy(
        update={"kv_cache_tokens": small, "n_ctx": small, "parallel_requests": 1, "retained_prompts": 0}
    )


async def _decode(settings: PolicySettings, fault: str) -> int:
    from services.policy.engines import create_engine
    from services.policy.engines.base import Message, Prompt, Sampling

    engine = await create_engine(settings)
    try:
        if fault:
            sig = signal.Signals[fault]
            if sig not in (signal.SIGKILL, signal.SIGSTOP):
                signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        prompt = Prompt(messages=(Message("user", "Say hello."),))
        generation = await engine.generate(prompt, Sampling(n=1, seeds=(0,), max_tokens=CHECK_TOKENS), "self-check")
        return generation.completions[0].completion_tokens
    finally:
        await engine.close()


def main() -> None:
    """The child: load the engine as the service would, decode, print ``{"tokens": n}``."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash here is expected, not a core file
    settings = child_settings(PolicySettings())
    tokens = asyncio.run(_decode(settings, os.environ.get(FAULT_ENV, "")))
    print(json.dumps({"tokens": tokens}), flush=True)


if __name__ == "__main__":
    main()

"""The engine self-check's decisions (pure): which engines are checked, the child's settings, and
the one line a failed check logs — the signal by name and the remedy."""

from __future__ import annotations

import signal

import pytest

from services.policy.engine_check import CheckOutcome, child_settings, failure_message, last_line, should_check
from services.policy.settings import PolicySettings


def outcome(returncode: int | None, last_output: str = "") -> CheckOutcome:
    return CheckOutcome(returncode, last_output, seconds=1.25, timeout_s=120)


def test_only_the_embedded_engine_is_checked_and_the_setting_switches_it_off() -> None:
    assert should_check(PolicySettings(engine="llamacpp"))
    assert not should_check(PolicySettings(engine="llamacpp", engine_self_check=False))
    assert not should_check(PolicySettings(engine="vllm"))
    assert not should_check(PolicySettings(engine="openai"))


def test_the_child_keeps_the_engine_settings_with_a_small_cache() -> None:
    settings = PolicySettings(model="smollm2-135m", n_threads=2, n_batch=64, kv_cache_tokens=16384)
    child = child_settings(settings)
    assert (child.model, child.n_threads, child.n_batch, child.engine) == ("smollm2-135m", 2, 64, "llamacpp")
    assert child.kv_cache_tokens == child.n_ctx == 512
    assert (child.parallel_requests, child.retained_prompts) == (1, 0)
    assert child_settings(PolicySettings(n_ctx=128)).n_ctx == 128


def test_a_clean_exit_passes() -> None:
    assert failure_message(outcome(0, "some chatter"), "m") is None


def test_sigill_names_the_signal_and_the_portable_rebuild() -> None:
    line = failure_message(outcome(-signal.SIGILL), "smollm2-135m")
    assert line == (
        "engine self-check died with SIGILL (illegal instruction): the llama.cpp library was compiled for "
        "another CPU (a native build); rebuild it portably: rm .venv/.engine-portable && make install, or "
        "rebuild the image (docs/policy-engines.md) (model smollm2-135m, 1.2s)"
    )
    assert "\n" not in line


@pytest.mark.parametrize(
    ("sig", "words"),
    [
        (signal.SIGSEGV, "SIGSEGV (segmentation fault): llama.cpp crashed"),
        (signal.SIGBUS, "SIGBUS (bus error): the model file could not be read"),
        (signal.SIGKILL, "SIGKILL (killed): killed from outside, most often by the kernel's out-of-memory killer"),
        (signal.SIGABRT, "SIGABRT (aborted): llama.cpp aborted"),
        (signal.SIGUSR1, "SIGUSR1 (user defined signal 1): the engine crashed at its first decode"),
    ],
)
def test_every_signal_is_named_with_a_cause(sig: signal.Signals, words: str) -> None:
    line = failure_message(outcome(-sig), "m")
    assert line is not None and line.startswith(f"engine self-check died with {words}")


def test_a_failure_carries_the_childs_last_output() -> None:
    line = failure_message(outcome(1, "ValueError: llama.cpp could not load /m.gguf"), "/m.gguf")
    assert line == (
        "engine self-check failed (exited (1)): the engine could not load or decode (model /m.gguf, 1.2s); "
        "last output: ValueError: llama.cpp could not load /m.gguf"
    )
    aborted = failure_message(outcome(-signal.SIGABRT, "GGML_ASSERT(n > 0) failed"), "m")
    assert aborted is not None and aborted.endswith("; last output: GGML_ASSERT(n > 0) failed")


def test_a_child_that_hangs_is_a_failure_naming_the_timeout_setting() -> None:
    line = failure_message(outcome(None), "m")
    assert line is not None and line.startswith("engine self-check did not finish within 120s")
    assert "TTC_POLICY_ENGINE_SELF_CHECK_TIMEOUT_S" in line


def test_last_line_skips_blank_lines_and_is_bounded() -> None:
    assert last_line(b"load\nTraceback\n  ...\nValueError: bad\n\n") == "ValueError: bad"
    assert last_line(b"") == ""
    assert len(last_line(b"x" * 2000)) == 500

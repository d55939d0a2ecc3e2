"""``ttc stack`` names how a child ended: the exit line (a signal by name), the crash-loop report
with the last lines of the child's log (pure formatting), and, with real child processes, a child
killed by SIGILL in a crash loop and one that dies while the stack starts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from services import stack
from services.stack import Backoff, Child, RestartState, exit_report, log_tail, supervise, tail_block

# A child that writes a line and kills itself with SIGILL (no core file), as a native
# llama.cpp build does on a CPU without its instructions.
SIGILL_CHILD = (
    "import os, resource, signal; resource.setrlimit(resource.RLIMIT_CORE, (0, 0)); "
    "print('engine self-check died with SIGILL', flush=True); os.kill(os.getpid(), signal.SIGILL)"
)


def test_an_exit_line_names_the_signal() -> None:
    assert exit_report("policy", -4, 1.0, 1, ["ignored"]) == (
        "policy killed by SIGILL (illegal instruction, -4); restarting in 1.0s (see .run/policy.log)"
    )
    assert exit_report("worker", 3, 2.0, 1, []) == "worker exited (3); restarting in 2.0s (see .run/worker.log)"


def test_a_crash_loop_shows_the_last_lines_of_the_log() -> None:
    report = exit_report("policy", -11, 4.0, 3, ["loading", "engine self-check died with SIGSEGV"])
    assert report.splitlines() == [
        "policy killed by SIGSEGV (segmentation fault, -11); restarting in 4.0s (see .run/policy.log)",
        "policy is crash-looping (3 quick exits in a row); last lines of .run/policy.log:",
        "  | loading",
        "  | engine self-check died with SIGSEGV",
    ]
    assert exit_report("policy", -11, 4.0, 3, []).count("\n") == 0  # nothing to show: just the exit


def test_tail_block_and_log_tail(tmp_path: Path) -> None:
    assert tail_block("x", ["a", "b"]) == "; last lines of .run/x.log:\n  | a\n  | b"
    log = tmp_path / "x.log"
    log.write_text("".join(f"line {i}\n\n" for i in range(30)))
    assert log_tail(log, 3) == ["line 27", "line 28", "line 29"]
    assert log_tail(tmp_path / "missing.log") == []


def test_a_crash_looping_child_is_named_by_its_signal_with_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(stack, "RUN_DIR", tmp_path)
    backoff = Backoff(initial_s=0.01, factor=1.0, max_s=0.01, stable_s=60.0)
    child = Child("policy", [sys.executable, "-c", SIGILL_CHILD], lambda: True, state=RestartState(backoff))
    child.start({})
    supervise([child], {}, lambda: child.state.restarts >= 2, tick_s=0.01)
    err = capsys.readouterr().err
    assert err.count("policy killed by SIGILL (illegal instruction, -4); restarting in 0.0s") == 2
    assert err.count("policy is crash-looping") == 1  # the second exit, the first of the loop
    assert f"policy is crash-looping (2 quick exits in a row); last lines of {tmp_path}/policy.log:" in err
    assert "  | engine self-check died with SIGILL" in err


def test_a_child_that_dies_while_starting_stops_the_stack_with_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stack, "RUN_DIR", tmp_path)
    child = Child("policy", [sys.executable, "-c", SIGILL_CHILD], lambda: False)
    child.start({})
    with pytest.raises(RuntimeError) as failed:
        child.wait_ready(timeout=30, stopping=lambda: False)
    assert str(failed.value) == (
        f"policy killed by SIGILL (illegal instruction, -4) while starting; last lines of {tmp_path}/policy.log:\n"
        "  | engine self-check died with SIGILL"
    )

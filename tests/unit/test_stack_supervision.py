"""``ttc stack`` supervision: the backoff and restart policy (pure, with a clock passed in), and
the supervise loop restarting a real child process that keeps exiting."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from services import stack
from services.stack import Backoff, Child, RestartState, redis_command, supervise


def test_backoff_doubles_from_initial_and_is_capped() -> None:
    backoff = Backoff(initial_s=1.0, factor=2.0, max_s=30.0)
    assert [backoff.delay(n) for n in range(1, 8)] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert backoff.delay(1000) == 30.0


def test_quick_exits_back_off_and_a_stable_run_resets() -> None:
    state = RestartState(Backoff(initial_s=1.0, factor=2.0, max_s=5.0, stable_s=10.0))
    state.started(0.0)
    assert not state.waiting
    assert state.exited(1.0) == 1.0
    assert state.waiting and not state.due(1.5) and state.due(2.0)
    state.started(2.0)
    assert state.exited(3.0) == 2.0  # ran 1 s: a quick exit, backoff grows
    state.started(5.0)
    assert state.exited(6.0) == 4.0
    state.started(10.0)
    assert state.exited(11.0) == 5.0  # capped
    state.started(16.0)
    assert state.exited(26.0) == 1.0  # ran 10 s: healthy again, back to the initial delay
    assert state.failures == 1


def test_redis_runs_with_an_append_only_file_fsynced_every_second(tmp_path: Path) -> None:
    command = redis_command("redis-server", 6390, tmp_path)
    pairs = dict(zip(command[1::2], command[2::2], strict=True))
    assert pairs["--appendonly"] == "yes"
    assert pairs["--appendfsync"] == "everysec"
    assert pairs["--dir"] == str(tmp_path)
    assert pairs["--bind"] == "127.0.0.1"


def test_supervise_restarts_an_exiting_child_with_backoff_until_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(stack, "RUN_DIR", tmp_path)
    backoff = Backoff(initial_s=0.05, factor=2.0, max_s=0.2, stable_s=60.0)
    child = Child("flaky", [sys.executable, "-c", "import sys; sys.exit(3)"], lambda: True, state=RestartState(backoff))
    child.start({})
    deadline = time.monotonic() + 20

    def stopping() -> bool:
        return child.state.restarts >= 4 or time.monotonic() > deadline

    started = time.monotonic()
    supervise([child], {}, stopping, tick_s=0.01)
    assert child.state.restarts == 4
    # Waits of 0.05 + 0.1 + 0.2 + 0.2 (capped) at least.
    assert time.monotonic() - started >= 0.55
    err = capsys.readouterr().err
    assert err.count("flaky exited (3); restarting in") == 4
    assert "restarting in 0.2s" in err and "restarting in 0.4s" not in err
    assert "flaky restarted (pid " in err
    assert (tmp_path / "flaky.pid").read_text().strip() == str(child.proc.pid if child.proc else "")


def test_the_large_model_is_its_own_policy_deployment_wired_to_the_gateway_and_workers() -> None:
    from services.common.settings import StackSettings
    from services.stack import large_model_wiring

    env = {"TTC_GATEWAY_POLICY_TARGETS": "other=10.0.0.5:50051", "PATH": "/bin"}
    assert large_model_wiring(StackSettings(large_model=""), env) == ({}, env)
    child, wired = large_model_wiring(StackSettings(large_model="qwen2.5-coder-1.5b", large_model_port=50071), env)
    assert child["TTC_POLICY_MODEL"] == "qwen2.5-coder-1.5b" and child["TTC_POLICY_PORT"] == "50071"
    assert wired["TTC_GATEWAY_POLICY_TARGETS"] == "other=10.0.0.5:50051,qwen2.5-coder-1.5b=127.0.0.1:50071"
    assert wired["TTC_ORCHESTRATOR_POLICY_TARGETS"] == "qwen2.5-coder-1.5b=127.0.0.1:50071"
    assert wired["TTC_VERIFIER_POLICY_TARGETS"] == "qwen2.5-coder-1.5b=127.0.0.1:50071"
    assert wired["TTC_ORCHESTRATOR_ESCALATION_MODEL"] == "qwen2.5-coder-1.5b"
    assert wired["PATH"] == "/bin" and "TTC_POLICY_MODEL" not in wired


def test_the_default_model_is_routed_by_its_escalation_table_where_one_was_fitted(tmp_path: Path) -> None:
    from services.common.settings import StackSettings
    from services.stack import large_model_wiring

    large = StackSettings(large_model="big")
    env = {"TTC_POLICY_MODEL": "small"}
    assert "TTC_GATEWAY_ROUTING_TABLES" not in large_model_wiring(large, env, tmp_path)[1]  # none fitted
    table = tmp_path / "routing.small+big.json"
    table.write_text("{}")
    wired = large_model_wiring(large, env, tmp_path)[1]
    assert wired["TTC_GATEWAY_ROUTING_TABLES"].split(",") == [
        "qwen2.5-coder-0.5b=services/gateway/routing/routing.qwen2.5-coder-0.5b.json",  # the shipped ones stay
        f"small={table}",
    ]
    mine = {**env, "TTC_GATEWAY_ROUTING_TABLES": "small=mine.json"}
    assert large_model_wiring(large, mine, tmp_path)[1]["TTC_GATEWAY_ROUTING_TABLES"] == "small=mine.json"

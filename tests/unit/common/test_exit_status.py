"""A process's end in words: exit statuses as numbers, signals by name and meaning."""

from __future__ import annotations

import signal

from services.common.exit_status import describe_exit, signal_label


def test_signals_are_named_with_their_meaning() -> None:
    assert signal_label(signal.SIGILL) == "SIGILL (illegal instruction)"
    assert signal_label(signal.SIGSEGV) == "SIGSEGV (segmentation fault)"
    assert signal_label(signal.SIGKILL) == "SIGKILL (killed)"
    assert signal_label(200) == "signal 200"


def test_a_return_code_reads_as_an_exit_status_or_the_signal_that_killed() -> None:
    assert describe_exit(0) == "exited (0)"
    assert describe_exit(3) == "exited (3)"
    assert describe_exit(-4) == "killed by SIGILL (illegal instruction, -4)"
    assert describe_exit(-9) == "killed by SIGKILL (killed, -9)"
    assert describe_exit(-11) == "killed by SIGSEGV (segmentation fault, -11)"
    assert describe_exit(-200) == "killed by signal 200 (-200)"

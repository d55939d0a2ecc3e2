"""Fixtures shared by all tests (a private Redis), and the rule that a skip fails CI.

A skipped test passes silently: under ``CI=true`` any skip fails the run, naming each skipped
test and its reason. A test that cannot run on CI's machine is deselected by name in the
Makefile, with the reason beside it, so what CI does not run is written down, not found in a
log.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.helpers.processes import RedisServer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

#: the skips seen in this session (test id, reason), collection skips included
_SKIPPED: list[tuple[str, str]] = []


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


def _record_skip(report: pytest.CollectReport | pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        _SKIPPED.append((report.nodeid, reason.removeprefix("Skipped: ")))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _record_skip(report)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    _record_skip(report)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under CI=true a run with a skip fails (exit status 1), even when every test passed."""
    if _in_ci() and _SKIPPED and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not (_in_ci() and _SKIPPED):
        return
    terminalreporter.section("skips fail under CI=true", sep="=", red=True, bold=True)
    for nodeid, reason in _SKIPPED:
        terminalreporter.line(f"SKIPPED {nodeid}: {reason}")
    terminalreporter.line(
        f"{len(_SKIPPED)} skipped: make it run here, or deselect it by name in the Makefile "
        "(--deselect) with the reason in a comment."
    )


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    """A private Redis for one test module: its keys and queues are its own."""
    server = RedisServer().start()
    try:
        yield server.url
    finally:
        server.stop()

"""The shared model lock is polite and fair between polite jobs: a drawer that re-asks right
after its chunk lets a polite waiter (the routed runner, a validation run) go first, and a
crashed waiter's announcement goes stale instead of blocking everyone."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from calibration.lib.services import model_lock, other_waiter, waiting_marker

POLL = 0.05


def test_other_waiter_counts_a_fresh_announcement_by_someone_else_only(tmp_path: Path) -> None:
    marker = waiting_marker(tmp_path / "m.lock")
    assert marker.name == "m.lock.waiting"
    assert not other_waiter(marker, "a", POLL)  # nobody announced
    marker.write_text("b")
    assert other_waiter(marker, "a", POLL) and not other_waiter(marker, "b", POLL)
    old = time.time() - 10 * POLL
    os.utime(marker, (old, old))  # b crashed: its announcement is stale
    assert not other_waiter(marker, "a", POLL)


def test_a_holder_that_re_asks_at_once_lets_the_polite_waiter_go_first(tmp_path: Path) -> None:
    lock, order = tmp_path / "m.lock", []

    def waiter() -> None:
        with model_lock(lock, poll_s=POLL, me="b"):
            order.append("b")

    thread = threading.Thread(target=waiter)
    with model_lock(lock, poll_s=POLL, me="a"):
        thread.start()
        deadline = time.monotonic() + 5
        while not waiting_marker(lock).exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        order.append("a: first chunk")
    with model_lock(lock, poll_s=POLL, me="a") as waited:  # the drawer's next chunk, asked at once
        order.append("a: next chunk")
    thread.join(5)
    assert order == ["a: first chunk", "b", "a: next chunk"]
    assert waited > 0 and not waiting_marker(lock).exists()  # b withdrew once it held the lock


def test_a_stale_announcement_does_not_block(tmp_path: Path) -> None:
    lock = tmp_path / "m.lock"
    marker = waiting_marker(lock)
    marker.write_text("ghost")
    old = time.time() - 10 * POLL
    os.utime(marker, (old, old))
    with model_lock(lock, poll_s=POLL, me="a") as waited:
        assert waited < POLL

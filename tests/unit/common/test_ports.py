"""The free-port picker: outside the ephemeral range, never twice, never a held port."""

from __future__ import annotations

import socket
from pathlib import Path

from services.common import ports


def test_ports_are_drawn_below_the_ephemeral_range_and_never_twice() -> None:
    low, _ = ports.ephemeral_range()
    picked = [ports.free_port() for _ in range(200)]
    assert len(set(picked)) == len(picked)
    assert all(ports.LOWEST_PORT <= p < low for p in picked)


def test_a_port_someone_listens_on_is_never_handed_out(monkeypatch) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        monkeypatch.setattr(ports, "candidate_range", lambda _: (port, port))
        assert not ports.bindable(port)
        assert ports.free_port() != port  # the only candidate is held: the kernel's pick instead


def test_the_ephemeral_range_file_is_read_and_a_bad_one_falls_back(tmp_path: Path) -> None:
    good = tmp_path / "range"
    good.write_text("40000\t50000\n")
    assert ports.ephemeral_range(good) == (40000, 50000)
    good.write_text("garbage")
    assert ports.ephemeral_range(good) == ports.DEFAULT_EPHEMERAL_RANGE
    assert ports.ephemeral_range(tmp_path / "missing") == ports.DEFAULT_EPHEMERAL_RANGE


def test_the_candidate_stretch_is_the_widest_outside_the_ephemeral_range() -> None:
    assert ports.candidate_range((32768, 60999)) == (ports.LOWEST_PORT, 32767)
    assert ports.candidate_range((10500, 40000)) == (40001, 65535)
    assert ports.candidate_range((1024, 65535)) is None

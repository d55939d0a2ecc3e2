"""Bad input is refused with a clear message before any load is sent; an interrupted run keeps
what it measured."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from loadtests.cli import main
from tests.helpers.processes import ROOT, free_port


class _Stub(BaseHTTPRequestHandler):
    """A minimal OpenAI-shaped server that counts chat requests (slowly answered)."""

    chats = 0
    delay = 0.3

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send({"object": "list", "data": [{"id": "m", "object": "model", "created": 0, "owned_by": "t"}]})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).chats += 1
        time.sleep(type(self).delay)
        self._send({
            "id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "The answer is \\boxed{3}"}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12},
            "ttc": {"strategy": "single", "effort_applied": "low", "termination": "completed"},
        })  # fmt: skip


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # clients that hang up (locust at its time limit) are not the server's problem


@pytest.fixture
def stub() -> Iterator[str]:
    _Stub.chats, _Stub.delay = 0, 0.3
    server = _QuietServer(("127.0.0.1", free_port()), _Stub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def _run(tmp_path: Path, base_url: str, *extra: str) -> int:
    return main(["run", "--base-url", base_url, "--model", "m", "--datasets", "chain_sum", "--problems", "1",
                 "--out", str(tmp_path / "run"), "--no-stream", *extra])  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--datasets", "gsm9k"], "unknown data set 'gsm9k'"),
        (["--strategies", "beam_serch"], "unknown strategy 'beam_serch'"),
        (["--efforts", ""], "the grid has no efforts"),
        (["--strategies", " , "], "the grid has no strategies"),
        (["--model", "nope"], "model 'nope' is not served"),
    ],
)
def test_bad_input_is_refused_before_load(
    tmp_path: Path, stub: str, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert _run(tmp_path, stub, *extra) == 2
    assert message in capsys.readouterr().err
    assert _Stub.chats == 0


def test_unreachable_gateway(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(tmp_path, f"http://127.0.0.1:{free_port()}/v1") == 2
    assert "gateway unreachable" in capsys.readouterr().err
    assert not (tmp_path / "run" / "records.jsonl").exists()


def test_a_run_records_and_reports(tmp_path: Path, stub: str) -> None:
    assert _run(tmp_path, stub, "--efforts", "low,high", "--strategies", "auto,single") == 0
    lines = (tmp_path / "run" / "records.jsonl").read_text().splitlines()
    assert len(lines) == 3 * 2 * 2
    first = json.loads(lines[0])
    assert first["strategy"] == "single" and first["prompt_tokens"] == 5
    assert main(["report", str(tmp_path / "run")]) == 0
    assert "<svg" in (tmp_path / "run" / "report" / "report.html").read_text()


def test_sigterm_keeps_what_was_measured(tmp_path: Path, stub: str) -> None:
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "loadtests", "run", "--base-url", stub, "--model", "m", "--datasets", "chain_sum",
           "--problems", "5", "--efforts", "low,medium,high", "--no-stream", "--out", str(out)]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    records = out / "records.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not records.exists() or len(records.read_text().splitlines()) < 2):
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    kept = records.read_text().splitlines()
    assert 2 <= len(kept) < 45
    meta = json.loads((out / "run.json").read_text())
    assert meta["interrupted"] is True and meta["recorded"] == len(kept)
    assert proc.returncode == 130, err.decode()

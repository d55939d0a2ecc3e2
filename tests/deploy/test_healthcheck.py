"""docker/healthcheck.py against a real gRPC health service and a real HTTP endpoint."""

from __future__ import annotations

import http.server
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from tests.deploy.conftest import ROOT
from tests.helpers.processes import free_port

SCRIPT = ROOT / "docker" / "healthcheck.py"


def check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=30, check=False)


@pytest.fixture
def health_server() -> Iterator[tuple[str, health.HealthServicer]]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = free_port()
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    yield f"127.0.0.1:{port}", servicer
    server.stop(None)


def test_grpc_serving_is_healthy(health_server: tuple[str, health.HealthServicer]) -> None:
    target, servicer = health_server
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    proc = check("grpc", target)
    assert proc.returncode == 0, proc.stderr


def test_grpc_not_serving_is_unhealthy(health_server: tuple[str, health.HealthServicer]) -> None:
    target, servicer = health_server
    servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    proc = check("grpc", target)
    assert proc.returncode == 1
    assert "NOT_SERVING" in proc.stderr


def test_grpc_nothing_listening_is_unhealthy() -> None:
    proc = check("grpc", f"127.0.0.1:{free_port()}")
    assert proc.returncode == 1
    assert "UNAVAILABLE" in proc.stderr or "DEADLINE_EXCEEDED" in proc.stderr


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/healthz" else 503)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return None


def test_http_status_decides() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        assert check("http", f"{base}/healthz").returncode == 0
        assert check("http", f"{base}/broken").returncode == 1
    finally:
        server.shutdown()
        server.server_close()


def test_usage_error() -> None:
    assert check("tcp", "x").returncode == 2

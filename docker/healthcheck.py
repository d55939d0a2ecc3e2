"""Container health check: ``ttc-healthcheck grpc HOST:PORT`` or ``ttc-healthcheck http URL``.

Images have no grpc_health_probe binary; this uses the grpcio already in the image to ask the
standard ``grpc.health.v1`` service, so docker-compose and Docker's HEALTHCHECK see the same
SERVING state Kubernetes' native gRPC probe sees. Exit 0 when healthy, 1 otherwise.
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request


def check_grpc(target: str, timeout: float) -> bool:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(target) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=timeout)
        except grpc.RpcError as exc:
            print(f"{target}: {exc.code().name}", file=sys.stderr)
            return False
    serving = reply.status == health_pb2.HealthCheckResponse.SERVING
    if not serving:
        print(f"{target}: {health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)}", file=sys.stderr)
    return serving


def check_http(url: str, timeout: float) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return 200 <= int(response.status) < 300
    except (urllib.error.URLError, OSError) as exc:
        print(f"{url}: {exc}", file=sys.stderr)
        return False


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("grpc", "http"):
        print("usage: ttc-healthcheck grpc HOST:PORT | http URL", file=sys.stderr)
        return 2
    kind, target = argv
    ok = check_grpc(target, 3.0) if kind == "grpc" else check_http(target, 3.0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

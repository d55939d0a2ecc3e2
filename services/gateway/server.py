"""Gateway process: settings → logging → tracing → app → uvicorn (graceful stop on SIGTERM).

uvicorn runs behind the connection guard (``connections.py``): header and body deadlines, a
header size cap and a connection cap; idle kept-alive connections close after ``keep_alive_s``.
"""

from __future__ import annotations

import uvicorn

from services.common.logging import configure_logging
from services.common.settings import CommonSettings
from services.common.tracing import configure_tracing
from services.gateway.app import build_app
from services.gateway.connections import ConnectionLimits, guarded_protocol
from services.gateway.settings import GatewaySettings
from services.jobs import validation
from services.jobs.validation import JobValidator


def connection_limits(settings: GatewaySettings) -> ConnectionLimits:
    return ConnectionLimits(
        header_timeout_s=settings.header_timeout_s,
        body_timeout_s=settings.body_timeout_s,
        max_connections=settings.max_connections,
        max_header_bytes=settings.max_header_bytes,
    )


def main(validate_job: JobValidator = validation.validate) -> None:
    """Serve the gateway; ``validate_job`` is what checks a job before it is enqueued."""
    common = CommonSettings()
    settings = GatewaySettings()
    configure_logging("gateway", common.log_level, common.log_json)
    configure_tracing("gateway", common.otel_endpoint, common.otel_console)
    app = build_app(settings, common, validate_job)
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=10,
        timeout_keep_alive=settings.keep_alive_s,
        http=guarded_protocol(connection_limits(settings)),
    )


if __name__ == "__main__":
    main()

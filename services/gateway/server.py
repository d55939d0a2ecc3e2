"""Gateway process: settings → logging → tracing → app → uvicorn (graceful stop on SIGTERM)."""

from __future__ import annotations

import uvicorn

from services.common.logging import configure_logging
from services.common.settings import CommonSettings
from services.common.tracing import configure_tracing
from services.gateway.app import build_app
from services.gateway.settings import GatewaySettings
from services.jobs import validation
from services.jobs.validation import JobValidator


def main(validate_job: JobValidator = validation.validate) -> None:
    """Serve the gateway; ``validate_job`` is what checks a job before it is enqueued."""
    common = CommonSettings()
    settings = GatewaySettings()
    configure_logging("gateway", common.log_level, common.log_json)
    configure_tracing("gateway", common.otel_endpoint, common.otel_console)
    app = build_app(settings, common, validate_job)
    uvicorn.run(
        app, host=settings.host, port=settings.port, log_config=None, access_log=False, timeout_graceful_shutdown=10
    )


if __name__ == "__main__":
    main()

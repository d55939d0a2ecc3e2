"""The one place failures become OpenAI error objects ``{"error": {message, type, param, code}}``.

Serving code raises (``services.common.errors`` types, gRPC errors, the gateway's own
``HTTPError``); ``install_error_handlers`` registers handlers so that every path - framework
validation, malformed JSON, unknown routes, a dead policy service - answers in one shape.
"""

from __future__ import annotations

import logging
from typing import Any

import grpc
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from services.common.errors import (
    DeadlineExceeded,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    ServiceError,
    Unavailable,
    error_field,
)
from services.gateway.protocol import ErrorDetail, ErrorResponse
from services.jobs.errors import JobError

log = logging.getLogger(__name__)


class HTTPError(Exception):
    """A gateway failure with its HTTP status, OpenAI ``type``/``code`` and optional headers."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code
        self.headers = headers or {}


class JobFailed(Exception):
    """A job that ended on its typed error without an answer to return."""

    def __init__(self, error: JobError) -> None:
        super().__init__(error.message)
        self.error = error


# Seconds a client is told to wait before retrying when a backend service is unavailable.
UNAVAILABLE_RETRY_AFTER_S = 5


def unauthorized(message: str) -> HTTPError:
    return HTTPError(401, message, type="authentication_error", code="invalid_api_key")


def too_many(message: str, retry_after_s: int, code: str = "rate_limit_exceeded") -> HTTPError:
    return HTTPError(429, message, type="rate_limit_error", code=code, headers={"Retry-After": str(retry_after_s)})


_SERVICE_STATUS: list[tuple[type[ServiceError], int, str]] = [
    (InvalidArgument, 400, "invalid_request_error"),
    (NotFound, 404, "invalid_request_error"),
    (FailedPrecondition, 409, "invalid_request_error"),
    (ResourceExhausted, 429, "rate_limit_error"),
    (Unavailable, 503, "server_error"),
    (DeadlineExceeded, 504, "server_error"),
]

_GRPC_STATUS: dict[grpc.StatusCode, tuple[int, str, str]] = {
    grpc.StatusCode.INVALID_ARGUMENT: (400, "invalid_request_error", "invalid_argument"),
    grpc.StatusCode.OUT_OF_RANGE: (400, "invalid_request_error", "invalid_argument"),
    grpc.StatusCode.NOT_FOUND: (404, "invalid_request_error", "not_found"),
    grpc.StatusCode.RESOURCE_EXHAUSTED: (429, "rate_limit_error", "resource_exhausted"),
    grpc.StatusCode.UNAVAILABLE: (503, "server_error", "service_unavailable"),
    grpc.StatusCode.DEADLINE_EXCEEDED: (504, "server_error", "deadline_exceeded"),
    grpc.StatusCode.CANCELLED: (499, "server_error", "cancelled"),
}


def error_response(
    status: int, message: str, type: str, param: str | None = None, code: str | None = None, **headers: str
) -> JSONResponse:
    body = ErrorResponse(error=ErrorDetail(message=message, type=type, param=param, code=code))
    return JSONResponse(status_code=status, content=body.model_dump(), headers=headers or None)


def to_error(exc: BaseException) -> tuple[int, ErrorDetail, dict[str, str]]:
    """Status, OpenAI error detail and headers for any exception serving code raises."""
    if isinstance(exc, HTTPError):
        return exc.status, ErrorDetail(message=exc.message, type=exc.type, param=exc.param, code=exc.code), exc.headers
    if isinstance(exc, JobFailed):
        return _job_error(exc.error)
    if isinstance(exc, ServiceError):
        for cls, status, kind in _SERVICE_STATUS:
            if isinstance(exc, cls):
                code = exc.code.name.lower()
                # A policy that stopped answering (upstream.py) is back within seconds: say when to retry.
                retry = {"Retry-After": str(UNAVAILABLE_RETRY_AFTER_S)} if isinstance(exc, Unavailable) else {}
                return status, ErrorDetail(message=exc.message, type=kind, param=exc.field or None, code=code), retry
    if isinstance(exc, grpc.aio.AioRpcError | grpc.RpcError) and hasattr(exc, "code"):
        status_code = exc.code()
        status, kind, code = _GRPC_STATUS.get(status_code, (502, "server_error", "upstream_error"))
        details = exc.details() if hasattr(exc, "details") else str(exc)
        headers: dict[str, str] = {}
        if status_code == grpc.StatusCode.UNAVAILABLE:
            details = f"the policy service is unavailable: {details}"
            headers["Retry-After"] = str(UNAVAILABLE_RETRY_AFTER_S)
        return (
            status,
            ErrorDetail(message=details or status_code.name, type=kind, param=error_field(exc) or None, code=code),
            headers,
        )
    log.exception("unhandled error", exc_info=exc)
    return (
        500,
        ErrorDetail(message=f"internal error: {type(exc).__name__}", type="server_error", code="internal_error"),
        {},
    )


def _job_error(error: JobError) -> tuple[int, ErrorDetail, dict[str, str]]:
    """A job's typed error by its gRPC code: UNAVAILABLE is 503 with Retry-After, INVALID_ARGUMENT
    400 naming the field, ...; a code without a client meaning (INTERNAL) is 500 ``search_failed``."""
    mapped = _GRPC_STATUS.get(grpc.StatusCode[error.code]) if error.code in grpc.StatusCode.__members__ else None
    if mapped is None:
        message = f"the search failed: {error.message}"
        return 500, ErrorDetail(message=message, type="server_error", code="search_failed"), {}
    status, kind, code = mapped
    message, headers = error.message, {}
    if error.code == "UNAVAILABLE":
        message = f"the {error.component or 'backend'} service is unavailable: {error.message}"
        headers["Retry-After"] = str(UNAVAILABLE_RETRY_AFTER_S)
    return status, ErrorDetail(message=message, type=kind, param=error.field or None, code=code), headers


def _validation_param(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path")]
    # Drop pydantic's union-branch tags such as "str" or "list[TextPart]" from the path.
    parts = [p for p in parts if not (p[:1].islower() and "[" in p) and p not in ("str", "int", "float", "bool")]
    return ".".join(parts)


def validation_detail(exc: RequestValidationError) -> ErrorDetail:
    """A 400 detail naming the first offending field (or saying the JSON is malformed)."""
    errors = exc.errors()
    if not errors:
        return ErrorDetail(message="invalid request", type="invalid_request_error", code="invalid_request")
    first = errors[0]
    if first.get("type") == "json_invalid":
        ctx = first.get("ctx") or {}
        return ErrorDetail(
            message=f"malformed JSON body: {ctx.get('error', 'cannot parse')}",
            type="invalid_request_error",
            code="invalid_json",
        )
    param = _validation_param(tuple(first.get("loc", ())))
    if first.get("type") == "extra_forbidden":
        message = f"unrecognized request argument supplied: {param}"
        code = "unknown_parameter"
    elif first.get("type") == "missing":
        message = f"missing required parameter: {param}"
        code = "missing_required_parameter"
    else:
        message = f"invalid value for {param or 'body'}: {first.get('msg', 'invalid')}"
        code = "invalid_value"
    return ErrorDetail(message=message, type="invalid_request_error", param=param or None, code=code)


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers that give every failure the OpenAI error shape."""

    async def on_validation(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        detail = validation_detail(exc)
        return JSONResponse(status_code=400, content=ErrorResponse(error=detail).model_dump())

    async def on_http(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        kind = "invalid_request_error" if exc.status_code < 500 else "server_error"
        code = {404: "not_found", 405: "method_not_allowed", 413: "request_too_large"}.get(exc.status_code)
        return error_response(exc.status_code, str(exc.detail), kind, code=code, **(exc.headers or {}))

    async def on_error(_request: Request, exc: Exception) -> JSONResponse:
        status, detail, headers = to_error(exc)
        return JSONResponse(
            status_code=status, content=ErrorResponse(error=detail).model_dump(), headers=headers or None
        )

    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(HTTPError, on_error)
    app.add_exception_handler(ServiceError, on_error)
    app.add_exception_handler(grpc.RpcError, on_error)
    app.add_exception_handler(Exception, on_error)


def request_field(job_field: str) -> str:
    """The request field a pinned job's validation error names: the job's ``strategy.params.<path>``
    is the request's ``ttc.params.<path>`` (nested, e.g. ``ttc.params.large_params.bogus``),
    ``strategy.name`` is ``ttc.strategy``, another ``strategy.<key>`` is ``ttc.<key>``, and any
    other job field is named by its last part under ``ttc``."""
    if not job_field:
        return "ttc"
    if job_field == "strategy.name":
        return "ttc.strategy"
    if job_field.startswith("strategy."):
        return "ttc." + job_field.removeprefix("strategy.")
    return "ttc." + job_field.rsplit(".", 1)[-1]

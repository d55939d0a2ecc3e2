"""Service errors and their gRPC status codes.

Servicers raise these; one server interceptor turns them into gRPC statuses, and the
gateway turns gRPC statuses into OpenAI error objects. The offending field travels in the
``ttc-error-field`` trailing metadata so the gateway can name it in ``param``.
"""

from __future__ import annotations

import grpc

FIELD_METADATA_KEY = "ttc-error-field"


class ServiceError(Exception):
    """Base class: a failure with a gRPC status code and, optionally, the field at fault."""

    code: grpc.StatusCode = grpc.StatusCode.INTERNAL

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


class InvalidArgument(ServiceError):
    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(ServiceError):
    code = grpc.StatusCode.NOT_FOUND


class ResourceExhausted(ServiceError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class Unavailable(ServiceError):
    code = grpc.StatusCode.UNAVAILABLE


class DeadlineExceeded(ServiceError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class FailedPrecondition(ServiceError):
    code = grpc.StatusCode.FAILED_PRECONDITION


def require(condition: bool, field: str, message: str) -> None:
    """Raise ``InvalidArgument`` naming ``field`` unless ``condition`` holds."""
    if not condition:
        raise InvalidArgument(message, field=field)


def error_field(err: grpc.aio.AioRpcError | grpc.RpcError) -> str:
    """The field named by a server's ``InvalidArgument``, if any."""
    trailing = err.trailing_metadata() if hasattr(err, "trailing_metadata") else None
    for key, value in trailing or ():
        if key == FIELD_METADATA_KEY:
            return str(value)
    return ""

"""Connection guard around uvicorn's HTTP protocol: slow and idle clients cannot pin the gateway.

uvicorn bounds neither how long a client may take to send its request headers or body, nor how
many connections stay open, nor (with httptools) the size of the headers; its
``limit_concurrency`` answers 503 once idle connections fill it, so idle clients would push real
requests into 5xx. ``guarded_protocol`` wraps the protocol uvicorn would pick and adds:

- a header deadline: from the moment a connection opens, or the first byte of the next request on
  a kept-alive one, the headers must be complete within ``header_timeout_s`` (else 408 and close);
- a header size cap: more than ``max_header_bytes`` before the headers end is 431 and close;
- a body deadline: once the headers arrived, the body must be complete within ``body_timeout_s``
  (else the connection closes and the app sees a disconnect);
- a connection cap: a connection above ``max_connections`` is closed as soon as it opens.

Idle kept-alive connections are closed by uvicorn's own ``timeout_keep_alive``.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, cast

log = logging.getLogger(__name__)

_TIMEOUT_408 = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
_TOO_LARGE_431 = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


@dataclass(frozen=True)
class ConnectionLimits:
    header_timeout_s: float
    body_timeout_s: float
    max_connections: int
    max_header_bytes: int


def _base_protocol() -> type[asyncio.Protocol]:
    """What uvicorn's ``http="auto"`` picks: httptools when installed, else h11."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        return HttpToolsProtocol
    except ImportError:  # pragma: no cover - httptools is in the lock file
        from uvicorn.protocols.http.h11_impl import H11Protocol

        return H11Protocol


def guarded_protocol(limits: ConnectionLimits, base: type[asyncio.Protocol] | None = None) -> type[asyncio.Protocol]:
    """A protocol class for ``uvicorn.run(http=...)`` enforcing ``limits`` around ``base``."""
    inner_class = base or _base_protocol()
    open_connections: set[GuardedProtocol] = set()

    class GuardedProtocol(asyncio.Protocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.inner: Any = inner_class(*args, **kwargs)
            self.loop = asyncio.get_event_loop()
            self.transport: asyncio.Transport | None = None
            self.refused = False
            self.header_timer: asyncio.TimerHandle | None = None
            self.body_timer: asyncio.TimerHandle | None = None
            self.header_bytes = 0
            self.seen_cycle: object = None

        # asyncio.Protocol
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = cast(asyncio.Transport, transport)  # uvloop's is not an asyncio.Transport subclass
            if len(open_connections) >= limits.max_connections:
                self.refused = True
                log.warning("connection refused: %d connections open", len(open_connections))
                self.transport.abort()
                return
            open_connections.add(self)
            self.inner.connection_made(transport)
            self._arm_header_deadline()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_timers()
            if self.refused:
                return
            open_connections.discard(self)
            self.inner.connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self.refused:
                return
            cycle = self.inner.cycle
            between_requests = cycle is None or bool(cycle.response_complete)
            if between_requests:
                if self.header_timer is None:
                    self._arm_header_deadline()
                self.header_bytes += len(data)
            self.inner.data_received(data)
            cycle = self.inner.cycle
            if cycle is not None and cycle is not self.seen_cycle:
                # A new request's headers are complete.
                self.seen_cycle = cycle
                self._cancel(self.header_timer)
                self.header_timer, self.header_bytes = None, 0
                if cycle.more_body:
                    self.body_timer = self.loop.call_later(limits.body_timeout_s, self._body_too_slow)
            elif between_requests and self.header_bytes > limits.max_header_bytes:
                self._reject(_TOO_LARGE_431, "request headers over %d bytes", limits.max_header_bytes)
            if self.body_timer is not None and cycle is not None and not cycle.more_body:
                self._cancel(self.body_timer)
                self.body_timer = None

        def eof_received(self) -> bool | None:
            return None if self.refused else self.inner.eof_received()

        def pause_writing(self) -> None:
            if not self.refused:
                self.inner.pause_writing()

        def resume_writing(self) -> None:
            if not self.refused:
                self.inner.resume_writing()

        # uvicorn's server calls these on its connections.
        def shutdown(self) -> None:
            self.inner.shutdown()

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        # Deadlines
        def _arm_header_deadline(self) -> None:
            self.header_bytes = 0
            self.header_timer = self.loop.call_later(limits.header_timeout_s, self._headers_too_slow)

        def _headers_too_slow(self) -> None:
            self.header_timer = None
            cycle = self.inner.cycle
            if cycle is None or cycle.response_complete:
                self._reject(_TIMEOUT_408, "request headers not complete after %.0fs", limits.header_timeout_s)

        def _body_too_slow(self) -> None:
            self.body_timer = None
            log.warning("closing a connection: request body not complete after %.0fs", limits.body_timeout_s)
            if self.transport is not None and not self.transport.is_closing():
                self.transport.close()

        def _reject(self, reply: bytes, why: str, limit: float) -> None:
            log.warning("closing a connection: " + why, limit)
            if self.transport is not None and not self.transport.is_closing():
                self.transport.write(reply)
                self.transport.close()

        def _cancel(self, timer: asyncio.TimerHandle | None) -> None:
            if timer is not None:
                timer.cancel()

        def _cancel_timers(self) -> None:
            self._cancel(self.header_timer)
            self._cancel(self.body_timer)
            self.header_timer = self.body_timer = None

    return GuardedProtocol

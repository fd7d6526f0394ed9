"""The connections the service holds: a deadline for each request's headers and a bound on
their number, below the ASGI app (which sees a request only once its headers are complete).

* **Header deadline.** A request's line and headers must be complete ``header_timeout_s`` after
  its first byte (or, for a connection's first request, after the connection opened); otherwise
  the connection is answered ``408`` and closed. Bytes trickling in do not extend it.
* **Bound.** At most ``max_connections`` are held; the next one makes room by closing the oldest
  connection that is waiting for headers (stalled or idle between requests, never one whose
  request runs), and is itself refused (``503``, closed) only when every held connection has a
  request running. So ``/healthz`` is answered while stalled clients fill the bound.

:func:`connection_bound` keeps the bound below the process's descriptor limit (``ulimit -n``)
less :data:`RESERVED_DESCRIPTORS` for the workers' pipes and files. Worked example: bound 64,
header timeout 30 s, 80 clients send ``POST /v1/step-plans HTTP/1.1\\r\\nHost: x\\r\\nContent-Ty``
and stall: the 65th to 80th evict the oldest 16 at once, the other 64 get ``408`` after 30 s.
"""

from __future__ import annotations

import asyncio
import logging
import resource

import uvicorn
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from hydraulis.service.settings import ServiceSettings

logger = logging.getLogger(__name__)

RESERVED_DESCRIPTORS = 64
"""Descriptors kept for the worker pool's pipes, the listening socket and files."""
TIMED_OUT = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
FULL = b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


def server_config(app, settings: ServiceSettings, **options) -> uvicorn.Config:
    """uvicorn's configuration for ``app`` with the connections guarded as ``settings`` say."""
    protocol = guarded_protocol(settings.header_timeout_s, connection_bound(settings.max_connections))
    return uvicorn.Config(app, http=protocol, **options)


def connection_bound(requested: int) -> int:
    """``requested``, lowered to the descriptor limit less :data:`RESERVED_DESCRIPTORS` (at least 1)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return requested
    bound = max(1, min(requested, soft - RESERVED_DESCRIPTORS))
    if bound < requested:
        logger.warning("max_connections %d lowered to %d: ulimit -n is %d", requested, bound, soft)
    return bound


def guarded_protocol(header_timeout_s: float, max_connections: int, base: type = AutoHTTPProtocol) -> type:
    """uvicorn's HTTP protocol ``base`` with the header deadline and the bound of the module docstring."""

    class GuardedProtocol(base):
        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            self.opened, self.header_timer, self.evicted = self.loop.time(), None, False
            self._arm()
            self._make_room()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._awaiting_headers():
                self._arm()
            else:
                self._disarm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _awaiting_headers(self) -> bool:
            return self.cycle is None or self.cycle.response_complete

        def _arm(self) -> None:
            if self.header_timer is None and not self.transport.is_closing():
                self.header_timer = self.loop.call_later(header_timeout_s, self._headers_late)

        def _disarm(self) -> None:
            if self.header_timer is not None:
                self.header_timer.cancel()
                self.header_timer = None

        def _headers_late(self) -> None:
            self.header_timer = None
            if self._awaiting_headers():
                self._close(TIMED_OUT)

        def _close(self, answer: bytes) -> None:
            self.evicted = True
            if not self.transport.is_closing():
                self.transport.write(answer)
                self.transport.close()

        def _make_room(self) -> None:
            held = [c for c in self.connections if not getattr(c, "evicted", False)]
            if len(held) <= max_connections:
                return
            waiting = [c for c in held if c is not self and isinstance(c, GuardedProtocol) and c._awaiting_headers()]
            if waiting:
                min(waiting, key=lambda c: c.opened)._close(TIMED_OUT)
            else:
                self._close(FULL)

    return GuardedProtocol


GuardedHTTPProtocol = guarded_protocol(ServiceSettings.header_timeout_s, ServiceSettings.max_connections)
"""The guard with the default settings, for ``uvicorn --http hydraulis.service.connections:GuardedHTTPProtocol``."""

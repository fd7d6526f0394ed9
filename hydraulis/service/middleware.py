"""ASGI middleware, outermost first: request ids with one structured log line per request;
bearer-token authentication; the body limit and the body-read timeout; admission to the worker
pool. Authentication answers from the headers alone, before any of the body is read; admission
comes once the whole body is read, so a slow client (headers and a few bytes, then silence)
holds no place in the queue, and it is answered 408 when its body does not arrive within the
timeout."""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
import uuid

from hydraulis.service.errors import error_body
from hydraulis.service.pool import WorkerPool

logger = logging.getLogger("hydraulis.service.access")


class RequestLog:
    """Gives every request an id (``X-Request-ID``, kept when the client sends one) and logs
    ``{"request_id", "method", "path", "status", "duration_ms"}`` as one JSON line (the full
    path, ``/v1/step-plans``)."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        request_id = headers.get(b"x-request-id", b"").decode("latin-1")[:64] or uuid.uuid4().hex
        status = {"code": 500}
        start = time.perf_counter()

        async def send_with_id(message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                message["headers"] = [*message.get("headers", []), (b"x-request-id", request_id.encode("latin-1"))]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            if logger.isEnabledFor(logging.INFO):
                logger.info(json.dumps({
                    "request_id": request_id, "method": scope.get("method"),
                    "path": scope.get("root_path", "") + scope.get("path", ""), "status": status["code"],
                    "duration_ms": round((time.perf_counter() - start) * 1e3, 3),
                }))


class BearerAuth:
    """With a ``token``, every request under ``prefix`` needs ``Authorization: Bearer <token>``;
    otherwise 401 with ``WWW-Authenticate: Bearer``, before the body is read."""

    def __init__(self, app, token: str | None, prefix: str = "/v1/") -> None:
        self.app, self.token, self.prefix = app, token, prefix

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and self.token is not None and scope.get("path", "").startswith(self.prefix):
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            scheme, _, credentials = given.partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(credentials.strip(), self.token.encode()):
                challenge = b"Bearer" if not given else b'Bearer error="invalid_token"'
                await respond(send, 401, error_body("unauthorized", "a valid bearer token is required "
                                                                    "(Authorization: Bearer <token>)"),
                              [(b"www-authenticate", challenge)])
                return
        await self.app(scope, receive, send)


class Admission:
    """Every ``POST`` under ``prefix`` takes a place in the worker pool's admission
    (:meth:`WorkerPool.admit`) for as long as it runs; without one it is answered 503 with
    ``Retry-After`` at once. It sits inside :class:`BodyLimit`: the body is read already."""

    def __init__(self, app, pool: WorkerPool, prefix: str = "/v1/") -> None:
        self.app, self.pool, self.prefix = app, pool, prefix

    async def __call__(self, scope, receive, send) -> None:
        planning = scope.get("method") == "POST" and scope.get("path", "").startswith(self.prefix)
        if scope["type"] != "http" or not planning:
            await self.app(scope, receive, send)
            return
        if not self.pool.admit():
            retry = self.pool.retry_after_s()
            await respond(send, 503, error_body("overloaded", f"all {self.pool.workers} planning workers are busy "
                                                              f"and {self.pool.queue} requests wait; retry after "
                                                              f"{retry} s"),
                          [(b"retry-after", str(retry).encode())])
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.pool.release()


class BodyLimit:
    """Answers 413 when a request body exceeds ``max_bytes``, declared or streamed, and 408 when
    the whole body has not arrived ``timeout_s`` after the request started: the body is read (up
    to the limit) before the app sees it, then replayed."""

    def __init__(self, app, max_bytes: int, timeout_s: float) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._reject(send)
            return
        chunks, size = [], 0
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        while True:
            try:
                message = await asyncio.wait_for(receive(), deadline - asyncio.get_running_loop().time())
            except asyncio.TimeoutError:
                await respond(send, 408, error_body("body_timeout", f"the request body did not arrive within "
                                                                    f"{self.timeout_s:g} s", "body"),
                              [(b"connection", b"close")])
                return
            if message["type"] != "http.request":
                await self.app(scope, _replay([message]), send)
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:
                await self._reject(send)
                return
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay([{"type": "http.request", "body": b"".join(chunks), "more_body": False}],
                                      receive), send)

    async def _reject(self, send) -> None:
        await respond(send, 413, error_body("body_too_large", f"request body exceeds max_body_bytes = "
                                                              f"{self.max_bytes}", "body"))


async def respond(send, status: int, document: dict, headers: list[tuple[bytes, bytes]] = ()) -> None:
    """Send a whole JSON response from ASGI middleware."""
    body = json.dumps(document).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})


def _replay(messages, then=None):
    """A ``receive`` that yields ``messages`` first, then defers to ``then`` (disconnects)."""
    pending = list(messages)

    async def receive():
        if pending:
            return pending.pop(0)
        if then is None:
            return {"type": "http.disconnect"}
        return await then()

    return receive

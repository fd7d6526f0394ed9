"""ASGI middleware: request ids with one structured log line per request, and the body limit."""

from __future__ import annotations

import json
import logging
import time
import uuid

from hydraulis.service.errors import error_body

logger = logging.getLogger("hydraulis.service.access")


class RequestLog:
    """Gives every request an id (``X-Request-ID``, kept when the client sends one) and logs
    ``{"request_id", "method", "route", "status", "duration_ms"}`` as one JSON line."""

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
            route = scope.get("route")
            logger.info(json.dumps({
                "request_id": request_id, "method": scope.get("method"),
                "route": getattr(route, "path", scope.get("path")), "status": status["code"],
                "duration_ms": round((time.perf_counter() - start) * 1e3, 3),
            }))


class BodyLimit:
    """Answers 413 when a request body exceeds ``max_bytes``, declared or streamed: the body is
    read (up to the limit) before the app sees it, then replayed."""

    def __init__(self, app, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._reject(send)
            return
        chunks, size = [], 0
        while True:
            message = await receive()
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
        body = json.dumps(error_body("body_too_large", f"request body exceeds max_body_bytes = {self.max_bytes}",
                                     "body")).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
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

"""The plan explorer's pages: plain HTML, CSS and JavaScript shipped in ``explorer/`` beside
this module (package data; no build step, nothing fetched from another origin), served at ``/``
and ``/explorer`` with the assets under ``/explorer/``. The pages hold no data: every number
comes from the ``/v1`` API, with the bearer token the user types into the page."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

from hydraulis.service.errors import ServiceError

ASSETS = resources.files("hydraulis.service").joinpath("explorer")
MEDIA_TYPES = {".html": "text/html; charset=utf-8", ".css": "text/css; charset=utf-8",
               ".js": "text/javascript; charset=utf-8"}
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
                               "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def explorer_routes() -> APIRouter:
    router = APIRouter(tags=["explorer"], include_in_schema=False)
    assets = {entry.name: entry for entry in ASSETS.iterdir()
              if any(entry.name.endswith(suffix) for suffix in MEDIA_TYPES)}

    @router.get("/")
    @router.get("/explorer")
    async def page() -> HTMLResponse:
        return HTMLResponse(assets["index.html"].read_text(encoding="utf-8"), headers=HEADERS)

    @router.get("/explorer/{name}")
    async def asset(name: str) -> Response:
        entry = assets.get(name)
        if entry is None:
            raise ServiceError(404, "not_found", f"no explorer asset named {name!r}", "name")
        suffix = name[name.rindex("."):]
        return Response(entry.read_bytes(), media_type=MEDIA_TYPES[suffix], headers=HEADERS)

    return router

"""API documentation that works offline: ``/docs`` (Swagger UI) and ``/redoc`` (ReDoc) from the
scripts and styles packaged with the ``fastapi-offline`` distribution, served under
``/docs-assets``; the pages name no external URL (no CDN, no web fonts, no validator badge)."""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = Path(fastapi_offline.__file__).parent / "static"
ASSETS_URL = "/docs-assets"
DOCS_URL = "/docs"
REDOC_URL = "/redoc"


def install_docs(app: FastAPI) -> None:
    """Add ``/docs``, ``/redoc`` and their assets to ``app`` (made with ``docs_url=None,
    redoc_url=None``)."""
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS), name="docs-assets")

    @app.get(DOCS_URL, include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url=app.openapi_url, title=f"{app.title} — Swagger UI",
                                   swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
                                   swagger_favicon_url=f"{ASSETS_URL}/favicon.png",
                                   swagger_ui_parameters={"validatorUrl": None})

    @app.get(REDOC_URL, include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(openapi_url=app.openapi_url, title=f"{app.title} — ReDoc",
                              redoc_js_url=f"{ASSETS_URL}/redoc.standalone.js",
                              redoc_favicon_url=f"{ASSETS_URL}/favicon.png", with_google_fonts=False)

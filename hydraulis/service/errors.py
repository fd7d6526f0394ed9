"""Every error the service returns has one shape: ``{"error": {"code", "message", "field"}}``."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from hydraulis.base.errors import HydraulisError

logger = logging.getLogger(__name__)


class ServiceError(Exception):
    """An error with its HTTP status, e.g. a limit (413) or a timed-out solve (504)."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field = status, code, message, field


def error_body(code: str, message: str, field: str | None = None) -> dict:
    return {"error": {"code": code, "message": message, "field": field}}


def field_path(location: tuple) -> str | None:
    """A validation error's location as the artifacts name fields: ``("body", "lengths", 1)`` →
    ``lengths[1]``."""
    path = ""
    for part in location:
        if part == "body" and not path:
            continue
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or None


NUMBER_ERRORS = {"greater_than", "greater_than_equal", "less_than", "less_than_equal", "int_parsing_size",
                 "finite_number"}
"""Validation errors of a number outside its range, answered with the range the schema states."""


def _bounds(request: Request, location: list) -> tuple[object, object] | None:
    """``(minimum, maximum)`` of the body field at ``location`` in the route's request schema."""
    route = request.scope.get("route")
    field = getattr(route, "body_field", None)
    model = getattr(getattr(field, "field_info", None), "annotation", None)
    if not hasattr(model, "model_json_schema"):
        return None
    root = model.model_json_schema()
    node = root
    for part in location:
        node = _resolve(root, node)
        node = node.get("items", {}) if isinstance(part, int) else node.get("properties", {}).get(part, {})
    node = _resolve(root, node)
    low = node.get("minimum", node.get("exclusiveMinimum"))
    high = node.get("maximum", node.get("exclusiveMaximum"))
    return None if low is None or high is None else (low, high)


def _resolve(root: dict, node: dict) -> dict:
    """``node`` with ``$ref`` followed and an optional's non-null branch taken."""
    if "$ref" in node:
        node = root.get("$defs", {}).get(node["$ref"].rsplit("/", 1)[-1], {})
    branches = [b for b in node.get("anyOf", ()) if b.get("type") != "null"]
    return _resolve(root, branches[0]) if len(branches) == 1 else node


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(HydraulisError)
    async def invalid_input(request: Request, error: HydraulisError) -> JSONResponse:
        return JSONResponse(error_body("invalid_input", str(error), error.field), status_code=422)

    @app.exception_handler(ServiceError)
    async def service_error(request: Request, error: ServiceError) -> JSONResponse:
        return JSONResponse(error_body(error.code, error.message, error.field), status_code=error.status)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, error: RequestValidationError) -> JSONResponse:
        first = error.errors()[0] if error.errors() else {"loc": (), "msg": "invalid request"}
        location = first.get("loc", ())
        field = field_path(location)
        message = first.get("msg")
        if first.get("type") in NUMBER_ERRORS:
            bounds = _bounds(request, [part for part in location if part != "body"])
            if bounds:
                message = f"{_short(first.get('input'))} must be between {bounds[0]} and {bounds[1]}"
        return JSONResponse(error_body("invalid_request", f"{field or 'body'}: {message}", field), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        code = {401: "unauthorized", 404: "not_found", 405: "method_not_allowed"}.get(error.status_code, "http_error")
        return JSONResponse(error_body(code, str(error.detail)), status_code=error.status_code,
                            headers=getattr(error, "headers", None))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, error: Exception) -> JSONResponse:
        logger.exception("unexpected error on %s", request.url.path)
        return JSONResponse(error_body("internal", "internal error; see the service log"), status_code=500)

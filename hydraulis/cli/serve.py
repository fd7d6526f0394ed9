"""``hydraulis serve``: the planning service on uvicorn."""

from __future__ import annotations

import argparse

from hydraulis.service.settings import TOKEN_VARIABLE


def register(commands: argparse._SubParsersAction) -> None:
    serve = commands.add_parser(
        "serve", help="serve proposals and step plans over HTTP",
        description=f"Serve the planning API (OpenAPI at /openapi.json, docs at /docs) with uvicorn. "
                    f"Set {TOKEN_VARIABLE} to require 'Authorization: Bearer <token>' on /v1/*.")
    serve.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1")
    serve.add_argument("--port", type=int, default=8000, help="default 8000")
    serve.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    serve.set_defaults(run=_serve)


def _serve(args: argparse.Namespace) -> None:
    import uvicorn

    uvicorn.run("hydraulis.service.app:app_from_environment", factory=True, host=args.host, port=args.port,
                workers=args.workers, log_level=args.log_level)

"""``hydraulis serve``: the planning service on uvicorn, planning in a pool of worker processes."""

from __future__ import annotations

import argparse
import os
import socket

from hydraulis.base import limits
from hydraulis.base.errors import HydraulisError
from hydraulis.cli.arguments import Bounded
from hydraulis.cli.output import emit
from hydraulis.service.settings import TOKEN_VARIABLE, ServiceSettings


def register(commands: argparse._SubParsersAction) -> None:
    defaults = ServiceSettings()
    serve = commands.add_parser(
        "serve", help="serve proposals and step plans over HTTP",
        description=f"Serve the planning API with uvicorn; prints one line with the URL and the docs (/docs, "
                    f"/redoc, OpenAPI at /openapi.json, all offline). Planning runs in --workers processes; "
                    f"up to --queue more requests wait for one, beyond that the answer is 503 with "
                    f"Retry-After. Set {TOKEN_VARIABLE} (at least 8 characters) to require 'Authorization: "
                    f"Bearer <token>' on /v1/*.",
        epilog="The plan explorer is at / (or /explorer). The same app runs under uvicorn --factory "
               "hydraulis.service.app:app_from_environment. docs/guide.md lists the routes, their fields, "
               "the answers' status codes and the explorer.")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=Bounded(limits.PORT), default=8000, help="default 8000")
    serve.add_argument("--workers", type=Bounded(limits.WORKERS), default=defaults.workers,
                       help=f"planning worker processes (default {defaults.workers})")
    serve.add_argument("--queue", type=Bounded(limits.QUEUE), default=defaults.queue,
                       help=f"requests admitted to wait for a worker (default {defaults.queue})")
    serve.add_argument("--max-connections", type=Bounded(limits.CONNECTIONS), default=defaults.max_connections,
                       help=f"connections held at most; beyond, the oldest still waiting for its headers is closed "
                            f"(default {defaults.max_connections}, lowered to fit ulimit -n)")
    serve.add_argument("--header-timeout-s", type=Bounded(limits.HEADER_TIMEOUT_S), default=defaults.header_timeout_s,
                       help=f"seconds a request's line and headers may take before its connection is answered 408 "
                            f"and closed (default {defaults.header_timeout_s:g})")
    serve.set_defaults(run=_serve)


def _serve(args: argparse.Namespace) -> None:
    import uvicorn

    from hydraulis.service.app import create_app
    from hydraulis.service.connections import server_config

    settings = ServiceSettings.from_environment(os.environ, workers=args.workers, queue=args.queue,
                                                max_connections=args.max_connections,
                                                header_timeout_s=args.header_timeout_s)
    listener = _listen(args.host, args.port)
    url = f"http://{args.host if ':' not in args.host else f'[{args.host}]'}:{args.port}"
    emit(f"hydraulis serve: listening on {url} — docs at {url}/docs and {url}/redoc (offline), OpenAPI at "
         f"{url}/openapi.json; {args.workers} planning worker{'s' if args.workers != 1 else ''}, queue "
         f"{args.queue}{', bearer token required on /v1/*' if settings.auth_token else ''}")
    config = server_config(create_app(settings), settings, log_level=args.log_level, access_log=False)
    uvicorn.Server(config).run(sockets=[listener])


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``; an address that cannot be used is a :class:`HydraulisError`."""
    try:
        family, kind, protocol, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                                flags=socket.AI_PASSIVE)[0]
        listener = socket.socket(family, kind, protocol)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(2048)
    except (OSError, UnicodeError) as error:
        raise HydraulisError("host:port", f"{host}:{port}", f"cannot be listened on ({error})") from None
    return listener

"""Limits and options of the planning service, fixed when the app is made."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from hydraulis.base.errors import require, require_int, require_number
from hydraulis.base.limits import CONNECTIONS, HEADER_TIMEOUT_S, QUEUE, WORKERS
from hydraulis.runtime.planner_client import TOKEN_VARIABLE


@dataclass(frozen=True)
class ServiceSettings:
    """``workers`` planning processes, ``queue`` more requests admitted to wait for one (beyond:
    503 with ``Retry-After``); ``auth_token`` (from ``HYDRAULIS_API_TOKEN``, at least 8
    characters) turns on bearer-token auth for ``/v1/*``; ``cors_origins`` empty keeps CORS off.
    Requests beyond a limit get 413 (body, sequences, devices × strategies) or 422 (devices,
    time limit) with a message naming the limit. ``default_time_limit_s`` is a proposal's
    planning time when the request names none, and the grace every deadline adds to the
    request's own time limit. A request whose body has not arrived ``body_timeout_s`` after it
    started is answered 408 (a slow client holds a connection, never a place in the queue); one
    whose request line and headers are not complete ``header_timeout_s`` after its first byte is
    answered 408 and closed, and at most ``max_connections`` are held, the oldest waiting for
    headers closed to make room (:mod:`hydraulis.service.connections`)."""

    workers: int = 1
    queue: int = 64
    max_body_bytes: int = 64 * 2**20
    max_sequences: int = 4_000_000
    max_devices: int = 65_536
    max_device_strategies: int = 65_536
    max_time_limit_s: float = 120.0
    default_time_limit_s: float = 10.0
    body_timeout_s: float = 30.0
    header_timeout_s: float = 30.0
    max_connections: int = 1_000
    auth_token: str | None = None
    cors_origins: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        WORKERS.check(self.workers, "workers")
        QUEUE.check(self.queue, "queue")
        require_int(self.max_device_strategies, "max_device_strategies", minimum=1)
        require_int(self.max_body_bytes, "max_body_bytes", minimum=1024)
        require_int(self.max_sequences, "max_sequences", minimum=1)
        require_int(self.max_devices, "max_devices", minimum=1)
        require_number(self.max_time_limit_s, "max_time_limit_s", minimum=0.0)
        require_number(self.default_time_limit_s, "default_time_limit_s", 0.0, self.max_time_limit_s)
        require(require_number(self.body_timeout_s, "body_timeout_s") > 0, "body_timeout_s", self.body_timeout_s,
                "must be > 0")
        HEADER_TIMEOUT_S.check(self.header_timeout_s, "header_timeout_s")
        CONNECTIONS.check(self.max_connections, "max_connections")
        require(self.auth_token is None or len(self.auth_token) >= 8, TOKEN_VARIABLE, "***",
                "must be at least 8 characters")

    @classmethod
    def from_environment(cls, environment: Mapping[str, str], **overrides) -> ServiceSettings:
        """Settings with the token taken from ``environment[HYDRAULIS_API_TOKEN]`` when set."""
        token = environment.get(TOKEN_VARIABLE) or None
        return cls(auth_token=token, **overrides)

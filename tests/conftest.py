"""Shared fixtures: the bundled original pools and spaces built from them."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import settings

from hydraulis.artifacts.original_pool import import_original_pool, pool_shape
from hydraulis.base.presets import device_preset, model_matching, model_preset
from hydraulis.base.types import Cluster, SchemeSpace
from hydraulis.profiler.analytic import analytic_scheme_space
from tests.cli.helpers import restored_logging

POOLS = resources.files("hydraulis.resources").joinpath("reference_pools")

# No per-example deadline for property tests: a loaded machine must not fail them (each test's
# max_examples bounds them).
settings.register_profile("no_deadline", deadline=None)
settings.load_profile("no_deadline")


def pool_path(name: str) -> Path:
    return Path(str(POOLS.joinpath(f"parallel_scheme_space_{name}.json")))


def load_pool(name: str) -> dict:
    return json.loads(pool_path(name).read_text())


def imported_space(name: str, devices: int = 64) -> SchemeSpace:
    document = load_pool(name)
    return import_original_pool(document, model_matching(*pool_shape(document)), devices, "a800-80g", 25.0,
                                 created="2026-01-01T00:00:00+00:00", tool_version="test")


def analytic_space(model: str = "llama-32b", device: str = "h100-80g", devices: int = 1024) -> SchemeSpace:
    spec = device_preset(device)
    return analytic_scheme_space(model_preset(model), spec, Cluster(devices, spec.devices_per_node, device),
                                 (1, 2, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8),
                                 created="2026-01-01T00:00:00+00:00", tool_version="test")


@pytest.fixture(scope="session")
def space_7b() -> SchemeSpace:
    return imported_space("7b")


@pytest.fixture(scope="session")
def space_13b() -> SchemeSpace:
    return imported_space("13b")


@pytest.fixture(scope="session")
def space_32b_analytic() -> SchemeSpace:
    return analytic_space()


@pytest.fixture(autouse=True)
def _cli_logging_restored():
    """Tests calling ``hydraulis.cli.main`` leave no log handler or level behind."""
    with restored_logging():
        yield


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


SERVICE_TOKEN = "service-test-token"


@contextmanager
def live_server(config) -> Iterator[int]:
    """A uvicorn server for ``config`` (a ``uvicorn.Config``) on a loopback port, in a thread of the
    test process, for the ``with`` block; yields the port and stops the server afterwards."""
    import uvicorn

    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            assert thread.is_alive(), "the planning service stopped while starting"
            time.sleep(0.05)
        yield listening.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join()
        listening.close()


@pytest.fixture(scope="session")
def planning_service() -> Iterator[str]:
    """A planning service (``hydraulis serve``'s app, bearer token :data:`SERVICE_TOKEN`) on a
    loopback port, in a thread of the test process; its URL."""
    import uvicorn

    from hydraulis.service.app import create_app
    from hydraulis.service.settings import ServiceSettings

    config = uvicorn.Config(create_app(ServiceSettings(auth_token=SERVICE_TOKEN)), log_level="warning")
    with live_server(config) as port:
        yield f"http://127.0.0.1:{port}"


@lru_cache(maxsize=None)
def mixed_cluster_spaces(model: str = "llama-13b", example: str = "examples/clusters/a100_h100.json"):
    """The example mixed cluster with an analytic space per group (design §7.4)."""
    from hydraulis.artifacts.cluster import read_cluster
    from hydraulis.base.cluster import ClusterSpaces
    from hydraulis.profiler.cluster import group_scheme_space

    cluster = read_cluster(Path(__file__).parent.parent / example)
    return ClusterSpaces(cluster, tuple(group_scheme_space(g, model_preset(model), "2026-01-01T00:00:00+00:00", "test")
                                        for g in cluster.groups))

"""``hydraulis serve`` says where it listens and where the docs are, in one line, then serves."""

import os
import selectors
import subprocess
import sys

import httpx

from tests.conftest import free_port


def test_serve_prints_its_url_and_the_docs_then_answers():
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "hydraulis", "serve", "--port", str(port), "--workers", "1"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "HYDRAULIS_API_TOKEN": ""})
    try:
        selector = selectors.DefaultSelector()
        selector.register(server.stdout, selectors.EVENT_READ)
        assert selector.select(timeout=60), "serve printed nothing"
        line = server.stdout.readline()
        url = f"http://127.0.0.1:{port}"
        assert line.startswith(f"hydraulis serve: listening on {url} — docs at {url}/docs and {url}/redoc"), line
        assert httpx.get(f"{url}/healthz", timeout=30).json() == {"status": "ok"}
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert "Traceback" not in server.stderr.read()

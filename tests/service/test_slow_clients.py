"""Slow clients cannot starve planning: 100 connections that send their headers and 13 bytes of a
1,000-byte body, then nothing, hold no place in the queue — a valid step plan is answered while
they stall — and each is answered 408 once the body-read timeout passes. Local only (127.0.0.1),
bounded: the stalled sockets are closed and the server stopped by the test."""

import json
import socket
import time
from pathlib import Path

import httpx
import uvicorn

from hydraulis.service.app import create_app
from hydraulis.service.settings import ServiceSettings
from tests.conftest import live_server

STALLED = 100
BODY_TIMEOUT_S = 3.0
PROPOSAL = json.loads((Path(__file__).resolve().parents[2] / "examples" / "proposals" / "7b_32dev.json").read_text())


def stall(port):
    """A connection that sends the headers and 13 bytes of a 1,000-byte body."""
    connection = socket.create_connection(("127.0.0.1", port))
    connection.sendall(b"POST /v1/step-plans HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                       b"Content-Length: 1000\r\n\r\n" + b'{"lengths": [')
    return connection


def test_stalled_bodies_hold_no_place_and_time_out():
    settings = ServiceSettings(workers=1, queue=4, body_timeout_s=BODY_TIMEOUT_S)
    with live_server(uvicorn.Config(create_app(settings), log_level="warning")) as port:
        stalled = [stall(port) for _ in range(STALLED)]
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
                assert client.get("/readyz").json()["admitted"] == 0
                started = time.perf_counter()
                answer = client.post("/v1/step-plans", json={"proposal": PROPOSAL, "lengths": [100, 2000, 4000]})
                elapsed = time.perf_counter() - started
            assert answer.status_code == 200, answer.text
            print(f"a valid step plan beside {STALLED} stalled connections: {elapsed:.2f} s")
            stalled[0].settimeout(60)
            reply = stalled[0].recv(4096).decode()
            assert reply.startswith("HTTP/1.1 408") and "body_timeout" in reply
        finally:
            for connection in stalled:
                connection.close()

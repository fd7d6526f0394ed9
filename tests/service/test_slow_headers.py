"""Connections that never finish their headers (hydraulis.service.connections): each is answered
408 and closed once the header deadline passes, and beyond the connection bound one of them is
closed to make room for each newcomer, so /healthz is answered while they fill it. Local only
(127.0.0.1), bounded: the sockets are closed and the server stopped by the test."""

import socket

import httpx

from hydraulis.service.app import create_app
from hydraulis.service.connections import server_config
from hydraulis.service.settings import ServiceSettings
from tests.conftest import live_server

STALLED_HEADER = b"POST /v1/step-plans HTTP/1.1\r\nHost: x\r\nContent-Ty"
HANG_GUARD_S = 60


def serve(settings):
    return live_server(server_config(create_app(settings), settings, log_level="warning"))


def stall(port):
    connection = socket.create_connection(("127.0.0.1", port))
    connection.sendall(STALLED_HEADER)
    connection.settimeout(HANG_GUARD_S)
    return connection


def close(connections):
    for connection in connections:
        connection.close()


def test_a_header_that_never_ends_is_answered_408_and_closed():
    with serve(ServiceSettings(header_timeout_s=1.0)) as port:
        stalled = [stall(port) for _ in range(3)]
        try:
            for connection in stalled:
                reply = connection.recv(4096)
                assert reply.startswith(b"HTTP/1.1 408"), reply
                assert connection.recv(4096) == b""
        finally:
            close(stalled)


def test_more_stalled_connections_than_the_bound_leave_healthz_answering():
    bound = 8
    with serve(ServiceSettings(header_timeout_s=600.0, max_connections=bound)) as port:
        stalled = [stall(port) for _ in range(3 * bound)]
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=HANG_GUARD_S) as client:
                for _ in range(3):
                    assert client.get("/healthz").json() == {"status": "ok"}
            held = 0
            for connection in stalled:  # those closed made room for the later ones and /healthz
                connection.settimeout(2)
                try:
                    assert connection.recv(4096).startswith(b"HTTP/1.1 408")
                except TimeoutError:
                    held += 1
            assert 0 < held <= bound
        finally:
            close(stalled)


def test_the_deadline_applies_to_each_request_of_a_kept_alive_connection():
    with serve(ServiceSettings(header_timeout_s=1.0)) as port:
        connection = socket.create_connection(("127.0.0.1", port))
        connection.settimeout(HANG_GUARD_S)
        try:
            connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert connection.recv(4096).startswith(b"HTTP/1.1 200")
            connection.sendall(STALLED_HEADER)
            assert connection.recv(4096).startswith(b"HTTP/1.1 408")
        finally:
            connection.close()

"""A request whose client goes away stops its work: the worker (and its CBC child) is killed and
replaced, and its temporary folder, which holds the solver's model files, is removed — so the
next request is served by a fresh worker instead of waiting for the abandoned one. Local only
(127.0.0.1), bounded waits."""

import json
import socket
import tempfile
import time
from pathlib import Path

import httpx

from hydraulis.service.app import create_app
from hydraulis.service.connections import server_config
from hydraulis.service.settings import ServiceSettings
from tests.conftest import live_server

HANG_GUARD_S = 120
PROPOSAL = json.loads((Path(__file__).resolve().parents[2] / "examples" / "proposals" / "7b_32dev.json").read_text())


def test_an_abandoned_proposal_stops_its_worker_and_removes_its_solver_files(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    settings = ServiceSettings(workers=1, queue=4)
    app = create_app(settings)
    with live_server(server_config(app, settings, log_level="warning")) as port:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=HANG_GUARD_S) as client:
            space = client.post("/v1/scheme-spaces/analytic", json={"model": "llama-70b", "device": "h100-80g",
                                                                    "devices": 8192}).json()
            abandoned = app.state.pool._all[0]
            body = json.dumps({"scheme_space": space, "devices": 8192, "devices_per_node": 8,
                               "token_budget": 12_800_000, "max_seq_len": 32768, "strategies": 8,
                               "lengths": list(range(100, 32000, 13)), "time_limit_s": 60}).encode()
            request = socket.create_connection(("127.0.0.1", port))
            request.sendall(b"POST /v1/proposals HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            time.sleep(1.0)  # abandoned after a second, as a client that gives up early
            assert abandoned.process.is_alive() and app.state.pool.admitted == 1  # the worker is at it
            request.close()
            answer = client.post("/v1/step-plans", json={"proposal": PROPOSAL, "lengths": [100, 2000, 4000]})
        assert answer.status_code == 200, answer.text
        assert not abandoned.process.is_alive()
        assert not Path(abandoned.folder).exists()
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith("hydraulis-worker-")] == \
            [Path(app.state.pool._all[0].folder).name]

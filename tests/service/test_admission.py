"""The service's admission control and worker pool: deadlines that start with the work and
stop it, 503 with Retry-After beyond the queue (once the body is read), authentication before the body, offline
docs."""

import asyncio
import json
import re

import pytest
from fastapi.testclient import TestClient

from hydraulis.service.app import create_app
from hydraulis.service.errors import ServiceError
from hydraulis.service.pool import WorkerPool
from hydraulis.service.settings import ServiceSettings
from tests.service import jobs

TOKEN = "admission-token"


def run(coroutine):
    return asyncio.run(coroutine)


def test_work_past_its_deadline_is_stopped_and_the_worker_replaced():
    async def scenario():
        pool = WorkerPool(1, 0)
        await pool.start()
        before = pool._all[0].process
        with pytest.raises(ServiceError) as stopped:
            await pool.run(jobs.sleep_forever, None, None, deadline_s=0.3)
        assert stopped.value.status == 504 and "deadline of 0.3 s" in stopped.value.message
        before.join(timeout=120)
        assert not before.is_alive()
        answer = await pool.run(jobs.echo, [1, 2], None, deadline_s=30)
        pool.close()
        return answer

    assert json.loads(run(scenario())) == {"echo": [1, 2]}


def test_the_deadline_starts_when_a_worker_starts(tmp_path):
    release = tmp_path / "release"

    async def scenario():
        pool = WorkerPool(1, 1)
        first = asyncio.create_task(pool.run(jobs.wait_for_file, str(release), None, deadline_s=60))
        await asyncio.sleep(0.2)
        second = asyncio.create_task(pool.run(jobs.echo, "queued", None, deadline_s=5.0))
        await asyncio.sleep(6.0)  # the second request waits longer than its deadline, which has not started
        release.write_text("go")
        answers = [json.loads(answer) for answer in await asyncio.gather(first, second)]
        pool.close()
        return answers

    assert run(scenario()) == [{"released": str(release)}, {"echo": "queued"}]


def test_a_cancelled_request_stops_its_work_and_a_failure_is_a_500():
    async def scenario():
        pool = WorkerPool(1, 0)
        await pool.start()
        before = pool._all[0].process
        task = asyncio.create_task(pool.run(jobs.sleep_forever, None, None, deadline_s=60))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        before.join(timeout=120)
        with pytest.raises(ServiceError) as failed:
            await pool.run(jobs.fail, None, None, deadline_s=30)
        pool.close()
        return before.is_alive(), failed.value.status

    assert run(scenario()) == (False, 500)


def test_admission_beyond_workers_and_queue_is_503_with_retry_after():
    app = create_app(ServiceSettings(workers=1, queue=2))
    pool = app.state.pool
    assert [pool.admit() for _ in range(4)] == [True, True, True, False]
    client = TestClient(app)
    response = client.post("/v1/step-plans", json={"proposal": {}, "lengths": [1]})
    assert response.status_code == 503
    assert int(response.headers["retry-after"]) >= 1
    assert response.json()["error"]["code"] == "overloaded"
    assert client.get("/v1/presets").status_code == 200  # only planning (POST) needs a place
    for _ in range(3):
        pool.release()
    assert client.post("/v1/step-plans", json={"proposal": {}, "lengths": [1]}).status_code == 422


def asgi_request(app, path: str, headers: list[tuple[bytes, bytes]]):
    """Send ``POST path`` to ``app`` with a body that must never be read; the response start."""
    sent = []

    async def receive():
        raise AssertionError("the body was read")

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": path, "raw_path": path.encode(), "root_path": "",
             "query_string": b"", "headers": [(b"content-length", b"67108864"), *headers],
             "http_version": "1.1", "scheme": "http", "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 1)}
    asyncio.run(app(scope, receive, send))
    return sent[0]


@pytest.mark.parametrize("authorization, challenge", [
    (None, b"Bearer"), (b"Bearer wrong-token", b'Bearer error="invalid_token"'),
    (b"Basic abc", b'Bearer error="invalid_token"'),
])
def test_a_missing_or_wrong_token_is_401_before_the_body_is_read(authorization, challenge):
    app = create_app(ServiceSettings(auth_token=TOKEN))
    start = asgi_request(app, "/v1/proposals", [(b"authorization", authorization)] if authorization else [])
    assert start["status"] == 401
    assert (b"www-authenticate", challenge) in start["headers"]


def test_a_full_queue_is_503_once_the_body_is_read():
    app = create_app(ServiceSettings(workers=1, queue=0))
    assert app.state.pool.admit()
    client = TestClient(app)
    response = client.post("/v1/step-plans", json={"proposal": {}, "lengths": [1]})
    assert response.status_code == 503 and "retry-after" in response.headers


def test_docs_are_served_offline():
    client = TestClient(create_app())
    for page in ("/docs", "/redoc"):
        html = client.get(page).text
        assert re.findall(r"(?:https?:)?//[\w.-]+", html) == [], page
        for asset in re.findall(r'(?:src|href)="(/docs-assets/[^"]+)"', html):
            response = client.get(asset)
            assert response.status_code == 200 and len(response.content) > 1000, asset


def test_access_log_names_the_full_path(caplog):
    client = TestClient(create_app())
    with caplog.at_level("INFO", logger="hydraulis.service.access"):
        client.post("/v1/step-plans", json={"proposal": {}, "lengths": [1]})
    line = json.loads(caplog.records[-1].getMessage())
    assert line["path"] == "/v1/step-plans" and line["status"] == 422

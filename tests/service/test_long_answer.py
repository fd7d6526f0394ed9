"""An answer longer than a pipe's buffer reaches the client whole through the real server
(uvicorn's event loop makes the worker's pipe non-blocking; the pool must still read it all)."""

import httpx

from tests.conftest import SERVICE_TOKEN


def test_an_answer_longer_than_the_pipe_buffer_arrives_whole(planning_service):
    response = httpx.post(f"{planning_service}/v1/lengths/synthetic", json={"docs": 200_000, "seed": 1},
                          headers={"Authorization": f"Bearer {SERVICE_TOKEN}"}, timeout=120)
    assert response.status_code == 200, response.text[:300]
    assert len(response.content) > 2**16 and len(response.json()["lengths"]) == 200_000

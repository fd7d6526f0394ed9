"""The training loop's client of the planning service, against a real server on loopback:
the same plan as in-process dispatch, bearer tokens, bounded retries, errors that name the field."""

from pathlib import Path

import httpx
import pytest

from hydraulis.artifacts import read_proposal
from hydraulis.base.errors import HydraulisError
from hydraulis.base.types import BatchingMethod
from hydraulis.dispatch import DispatchOptions
from hydraulis.dispatch.synthesis import plan_step
from hydraulis.runtime.planner_client import ClientOptions, PlannerClient, PlannerUnavailable
from tests.conftest import SERVICE_TOKEN, free_port

PROPOSAL = read_proposal(Path(__file__).resolve().parents[2] / "examples" / "proposals" / "7b_32dev.json")
LENGTHS = [32768, 9000, 4000, 3000, 2000] + [700] * 200
TOKEN = SERVICE_TOKEN


def test_the_service_plans_as_dispatch_does(planning_service):
    client = PlannerClient(planning_service, ClientOptions(token=TOKEN))
    options = DispatchOptions(seed=3, ilp_nodes=20)
    for method in (BatchingMethod.DISPATCH_BALANCED_PACKING, BatchingMethod.FIXED_PACKING):
        remote = client.step_plan(PROPOSAL, LENGTHS, method, options)
        local = plan_step(PROPOSAL, LENGTHS, method, options)
        assert remote.strategy_index == local.strategy_index
        assert remote.pipelines == local.pipelines
    client.close()


def test_a_bad_request_names_the_field_without_retrying(planning_service, monkeypatch):
    client = PlannerClient(planning_service, ClientOptions(token=TOKEN, attempts=3, backoff_s=5.0))
    posts = []
    monkeypatch.setattr(client.http, "post", lambda *args, post=client.http.post, **kwargs:
                        posts.append(args) or post(*args, **kwargs))
    with pytest.raises(HydraulisError, match="lengths"):
        client.step_plan(PROPOSAL, [10 ** 6], BatchingMethod.FIXED_PACKING, DispatchOptions())
    assert len(posts) == 1
    with pytest.raises(HydraulisError, match="401"):
        PlannerClient(planning_service).step_plan(PROPOSAL, LENGTHS, BatchingMethod.FIXED_PACKING, DispatchOptions())


def test_no_service_fails_after_the_attempts_with_the_url():
    url = f"http://127.0.0.1:{free_port()}"
    client = PlannerClient(url, ClientOptions(timeout_s=0.5, attempts=2, backoff_s=0.05))
    with pytest.raises(PlannerUnavailable, match=f"{url}/v1/step-plans: no step plan after 2 attempts"):
        client.step_plan(PROPOSAL, LENGTHS, BatchingMethod.FIXED_PACKING, DispatchOptions())


def test_the_url_must_be_http():
    with pytest.raises(HydraulisError, match="planner_url"):
        PlannerClient("127.0.0.1:8000")


def test_a_full_queue_is_retried_after_the_seconds_it_asks_for(monkeypatch):
    answers = iter([httpx.Response(503, headers={"Retry-After": "2"}, json={"error": {}}),
                    httpx.Response(503, headers={"Retry-After": "2"}, json={"error": {}})])
    slept = []
    monkeypatch.setattr("hydraulis.runtime.planner_client.time.sleep", slept.append)
    client = PlannerClient("http://127.0.0.1:1", ClientOptions(attempts=2, backoff_s=0.5))
    client.http = httpx.Client(base_url=client.url, transport=httpx.MockTransport(lambda request: next(answers)))
    with pytest.raises(PlannerUnavailable, match="HTTP 503"):
        client.step_plan(PROPOSAL, LENGTHS, BatchingMethod.FIXED_PACKING, DispatchOptions())
    assert slept == [2.0]

"""Fuzzing with hypothesis around valid documents: a valid proposal or scheme space with every
other field drawn at random, including out-of-range values. No generated input gets a 5xx, and
a plan that comes back places every sequence once. Bounded and derandomized."""

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hydraulis.artifacts import scheme_space_to_dict
from hydraulis.service.app import create_app


@pytest.fixture(scope="module")
def client():
    return TestClient(create_app())


@pytest.fixture(scope="module")
def proposal_document():
    return json.loads((Path(__file__).resolve().parents[2] / "examples" / "proposals" / "7b_32dev.json").read_text())


anything_int = st.one_of(st.integers(-5, 70_000), st.integers(-(2**70), 2**70))


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lengths=st.lists(anything_int, max_size=300), method=st.sampled_from(
    ["padding", "fixed_packing", "dispatch_fixed_packing", "dispatch_balanced_packing", "nope"]),
    alignment=st.integers(-2, 300), oversize=st.sampled_from(["error", "truncate", "split", "x"]),
    seed=st.integers(-1, 2**40))
def test_step_plans_with_a_valid_proposal_never_5xx(client, proposal_document, lengths, method, alignment,
                                                   oversize, seed):
    response = client.post("/v1/step-plans", json={"proposal": proposal_document, "lengths": lengths,
                                                   "method": method, "alignment": alignment,
                                                   "oversize": oversize, "seed": seed})
    assert response.status_code < 500, response.text[:500]
    if response.status_code == 200:
        placed = sorted(i for p in response.json()["pipelines"] for mb in p["micro_batches"] for i in mb["sequences"])
        assert set(placed) == set(range(len(lengths)))


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(devices=st.integers(-1, 300), per_node=st.integers(0, 9), budget=st.integers(-1, 300_000),
       longest=st.integers(-1, 200_000), lengths=st.lists(st.integers(-3, 50_000), max_size=50),
       strategies=st.integers(-1, 9))
def test_proposals_with_a_valid_space_never_5xx(client, space_7b, devices, per_node, budget, longest, lengths,
                                                strategies):
    response = client.post("/v1/proposals", json={
        "scheme_space": scheme_space_to_dict(space_7b), "devices": devices, "devices_per_node": per_node,
        "token_budget": budget, "max_seq_len": longest, "lengths": lengths, "strategies": strategies})
    assert response.status_code < 500, response.text[:500]

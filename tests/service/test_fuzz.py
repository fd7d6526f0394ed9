"""Fuzzing from the OpenAPI schema: no generated input gets a 5xx.

schemathesis draws bodies that follow the schema and bodies that break it (its negative mode:
values beyond every range, wrong types); then every numeric field of every request body is set,
one at a time, to huge integers and floats, NaN and infinities. Bounded: a fixed number of
examples per operation, no deadline per example, derandomized so CI sees the same inputs. A
request may take its time (``RESPONSE_S``: a hang guard, not a speed limit — on a loaded machine
the worker pool answers slowly)."""

import json
from functools import lru_cache
from pathlib import Path

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings

from hydraulis.artifacts import scheme_space_to_dict
from hydraulis.service.app import create_app
from tests.conftest import imported_space

APP = create_app()
CLIENT = TestClient(APP)
schema = schemathesis.openapi.from_asgi(
    "/openapi.json", APP, config=schemathesis.Config.from_dict({"generation": {"mode": "all"}}))

HUGE = [2**63, -(2**63), 10**30, 1e19, 1e308, -1e308, 1.5, "NaN", "Infinity", "-Infinity"]
RESPONSE_S = 300
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "proposals" / "7b_32dev.json"


@schema.parametrize()
@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
def test_no_server_error_on_any_generated_input(case):
    response = case.call(timeout=RESPONSE_S)
    assert response.status_code < 500, (case.method, case.path, response.text[:500])


@lru_cache(maxsize=1)
def valid_bodies() -> dict[str, dict]:
    proposal = json.loads(EXAMPLE.read_text())
    space = scheme_space_to_dict(imported_space("7b", 32))
    return {
        "/v1/step-plans": {"proposal": proposal, "lengths": [100, 200, 4000], "seed": 0, "ilp_nodes": 0,
                           "time_limit_s": 1.0, "alignment": 1},
        "/v1/proposals": {"scheme_space": space, "devices": 32, "devices_per_node": 8, "token_budget": 65536,
                          "max_seq_len": 32768, "lengths": [100, 200], "strategies": 2, "time_limit_s": 1.0,
                          "seed": 0},
        "/v1/scheme-spaces/analytic": {"model": "llama-7b", "device": "h100-80g", "devices": 16,
                                       "devices_per_node": 8},
        "/v1/scheme-spaces/validate": {"scheme_space": space, "optimizer_layout": {"dp": 32, "tp": 1, "pp": 1}},
        "/v1/memory": {"model": "tiny", "strategy": "1,2,2", "devices": 8, "devices_per_node": 4, "device": "cpu",
                       "tokens": 256, "optimizer_layout": {"dp": 2, "tp": 2, "pp": 2}},
    }


def numeric_fields(body: dict, path: tuple = ()) -> list[tuple]:
    found = []
    for key, value in body.items():
        if isinstance(value, dict) and key in ("optimizer_layout",):
            found += numeric_fields(value, (*path, key))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            found.append((*path, key))
    return found


CASES = [(route, field, value) for route, body in valid_bodies().items() for field in numeric_fields(body)
         for value in HUGE]


@pytest.mark.parametrize("route, field, value", CASES, ids=[f"{r} {'.'.join(f)}={v}" for r, f, v in CASES])
def test_huge_numbers_in_every_numeric_field_are_4xx_naming_it(route, field, value):
    body = json.loads(json.dumps(valid_bodies()[route]))
    target = body
    for key in field[:-1]:
        target = target[key]
    target[field[-1]] = "__VALUE__"
    raw = json.dumps(body).replace('"__VALUE__"', value if isinstance(value, str) else repr(value))
    response = CLIENT.post(route, content=raw, headers={"content-type": "application/json"})
    if value == 1.5 and field[-1] == "time_limit_s":
        assert response.status_code == 200
        return
    assert 400 <= response.status_code < 500, response.text[:300]
    assert response.json()["error"]["field"] == ".".join(field), response.text[:300]

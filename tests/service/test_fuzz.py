"""Fuzzing from the OpenAPI schema (schemathesis): no generated input gets a 5xx.

Bounded: a fixed number of examples per operation, no deadline per example, derandomized so
CI sees the same inputs every run."""

import schemathesis
from hypothesis import HealthCheck, settings

from hydraulis.service.app import create_app

schema = schemathesis.openapi.from_asgi("/openapi.json", create_app())


@schema.parametrize()
@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
def test_no_server_error_on_any_generated_input(case):
    response = case.call()
    assert response.status_code < 500, (case.method, case.path, response.text[:500])

"""Every route of the planning service, with its error paths."""

import pytest
from fastapi.testclient import TestClient

from hydraulis.artifacts import scheme_space_to_dict
from hydraulis.service.app import create_app
from hydraulis.service.settings import ServiceSettings

TOKEN = "test-token-123"


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app())


@pytest.fixture(scope="module")
def space_document(space_7b) -> dict:
    return scheme_space_to_dict(space_7b)


def test_health_and_readiness(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json()["status"] == "ready"


def test_openapi_and_docs(client):
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/v1/presets", "/v1/scheme-spaces/validate", "/v1/scheme-spaces/analytic"} <= paths.keys()
    assert client.get("/docs").status_code == 200


def test_presets(client):
    body = client.get("/v1/presets").json()
    assert body["models"]["llama-7b"]["hidden"] == 4096
    assert body["devices"]["h100-80g"]["devices_per_node"] == 8


def test_validate_space_rows(client, space_document):
    response = client.post("/v1/scheme-spaces/validate",
                           json={"scheme_space": space_document, "optimizer_layout": {"dp": 8, "tp": 4, "pp": 1}})
    assert response.status_code == 200
    body = response.json()
    assert body["valid"] and len(body["schemes"]) == 13
    assert body["schemes"][0]["max_seq_len"] > 0
    assert {k: body["schemes"][0][k] for k in ("sp", "recompute")} == {"sp": False, "recompute": "none"}


def test_validate_names_the_broken_field(client, space_document):
    broken = {**space_document, "schemes": [{**space_document["schemes"][0], "a": -1}]}
    response = client.post("/v1/scheme-spaces/validate", json={"scheme_space": broken})
    assert response.status_code == 422
    assert response.json()["error"] == {"code": "invalid_input", "field": "schemes[0].a",
                                        "message": "schemes[0].a: -1.0 must be >= 0.0"}


def test_validate_rejects_layout_not_dividing_devices(client, space_document):
    response = client.post("/v1/scheme-spaces/validate",
                           json={"scheme_space": space_document, "optimizer_layout": {"dp": 5, "tp": 4, "pp": 1}})
    assert response.status_code == 422
    assert "does not divide the 64 devices" in response.json()["error"]["message"]


def test_analytic_space(client):
    response = client.post("/v1/scheme-spaces/analytic", json={"model": "llama-7b", "device": "h100-80g", "devices": 16})
    assert response.status_code == 200
    assert response.json()["kind"] == "scheme_space"
    assert all(s["cp"] * s["tp"] * s["pp"] <= 16 for s in response.json()["schemes"])


@pytest.mark.parametrize("body, field", [
    ({"model": "gpt", "device": "h100-80g", "devices": 8}, "model"),
    ({"model": "llama-7b", "device": "h100-80g", "devices": 0}, "devices"),
    ({"model": "llama-7b", "device": "h100-80g", "devices": 8, "colour": "red"}, "colour"),
    ({"model": "llama-7b", "device": "h100-80g", "devices": 10**9}, "devices"),
    ({"model": "llama-7b", "device": "h100-80g"}, "devices"),
])
def test_analytic_bad_input_is_422_naming_the_field(client, body, field):
    response = client.post("/v1/scheme-spaces/analytic", json=body)
    assert response.status_code == 422
    assert response.json()["error"]["field"] == field


def test_malformed_json_and_unknown_route(client):
    response = client.post("/v1/scheme-spaces/analytic", content=b"{not json",
                           headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_request"
    assert client.get("/v2/nothing").json()["error"]["code"] == "not_found"


def test_body_limit_is_413():
    small = TestClient(create_app(ServiceSettings(max_body_bytes=4096)))
    response = small.post("/v1/scheme-spaces/validate", json={"scheme_space": {"pad": "x" * 10_000}})
    assert response.status_code == 413
    assert "max_body_bytes = 4096" in response.json()["error"]["message"]


def test_bearer_token():
    guarded = TestClient(create_app(ServiceSettings.from_environment({"HYDRAULIS_API_TOKEN": TOKEN})))
    assert guarded.get("/v1/presets").status_code == 401
    assert guarded.get("/v1/presets", headers={"Authorization": "Bearer wrong-token"}).status_code == 401
    assert guarded.get("/v1/presets", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    assert guarded.get("/healthz").status_code == 200


def test_request_id_is_echoed(client):
    assert client.get("/healthz", headers={"X-Request-ID": "abc"}).headers["x-request-id"] == "abc"
    assert len(client.get("/healthz").headers["x-request-id"]) == 32


@pytest.fixture(scope="module")
def example_proposal() -> dict:
    import json
    from pathlib import Path

    return json.loads((Path(__file__).resolve().parents[2] / "examples" / "proposals" / "7b_64dev.json").read_text())


def test_step_plan_places_every_sequence(client, example_proposal):
    lengths = [30000, 12, 4096, 700, 700, 20000, 1]
    response = client.post("/v1/step-plans", json={"proposal": example_proposal, "lengths": lengths, "seed": 3})
    assert response.status_code == 200
    plan = response.json()
    assert plan["kind"] == "step_plan" and plan["method"] == "dispatch_balanced_packing"
    placed = sorted(i for p in plan["pipelines"] for mb in p["micro_batches"] for i in mb["sequences"])
    assert placed == list(range(len(lengths)))
    assert plan["predicted_ms"] >= plan["lower_bound_ms"] > 0


@pytest.mark.parametrize("change, status, field", [
    (lambda b: b.__setitem__("lengths", []), 422, None),
    (lambda b: b.__setitem__("lengths", [5, -3]), 422, "lengths[1]"),
    (lambda b: b.__setitem__("method", "magic"), 422, "method"),
    (lambda b: b["proposal"].__setitem__("devices", 8), 422, None),
    (lambda b: b["proposal"].pop("strategies"), 422, "strategies"),
    (lambda b: b.__setitem__("time_limit_s", 10_000), 422, "time_limit_s"),
    (lambda b: b.__setitem__("synthesise", "space"), 422, "synthesise"),
    (lambda b: b.__setitem__("synthesise", "always"), 422, "synthesise"),
])
def test_step_plan_errors(client, example_proposal, change, status, field):
    import copy

    body = {"proposal": copy.deepcopy(example_proposal), "lengths": [100, 200]}
    change(body)
    response = client.post("/v1/step-plans", json=body)
    assert response.status_code == status
    error = response.json()["error"]
    assert error["message"]
    if field is not None:
        assert error["field"] == field


def test_step_plan_synthesis_from_the_space_or_none(client, example_proposal, space_document):
    lengths = [30000, 12, 4096, 700, 700, 20000, 1] * 8
    body = {"proposal": example_proposal, "lengths": lengths, "synthesise": "space", "scheme_space": space_document,
            "synthesis_evaluations": 4}
    made = client.post("/v1/step-plans", json=body)
    assert made.status_code == 200 and "synthesis" in made.json()
    off = client.post("/v1/step-plans", json={**body, "synthesise": "off"}).json()
    assert off["synthesis"] is None and made.json()["predicted_ms"] <= off["predicted_ms"]


def test_too_many_sequences_is_413(example_proposal):
    small = TestClient(create_app(ServiceSettings(max_sequences=10)))
    response = small.post("/v1/step-plans", json={"proposal": example_proposal, "lengths": [5] * 11})
    assert response.status_code == 413
    assert "max_sequences = 10" in response.json()["error"]["message"]


def test_proposal_from_lengths_and_from_histogram(client, space_document):
    common = {"scheme_space": space_document, "devices": 16, "devices_per_node": 8, "token_budget": 65536,
              "max_seq_len": 16384, "strategies": 2}
    lengths = [300] * 200 + [2000] * 40 + [16000] * 3
    by_lengths = client.post("/v1/proposals", json={**common, "lengths": lengths})
    assert by_lengths.status_code == 200, by_lengths.text
    body = by_lengths.json()
    assert body["kind"] == "proposal" and 1 <= len(body["strategies"]) <= 2
    assert all(s["devices"] <= 16 for s in body["strategies"])
    by_histogram = client.post("/v1/proposals", json={**common, "histogram": {"lengths": [300, 2000, 16000],
                                                                              "counts": [200, 40, 3]}})
    assert by_histogram.status_code == 200
    assert by_histogram.json()["strategies"] == body["strategies"]
    assert body["loss_chunk_tokens"] == 1024
    whole = client.post("/v1/proposals", json={**common, "lengths": lengths, "loss_chunk_tokens": 0})
    assert whole.status_code == 200 and whole.json()["loss_chunk_tokens"] == 0
    assert whole.json()["config"]["loss_chunk_tokens"] == 0


@pytest.mark.parametrize("extra, field", [
    ({}, "lengths"),
    ({"lengths": [5], "histogram": {"lengths": [5], "counts": [1]}}, "lengths"),
    ({"histogram": {"lengths": [5, 6], "counts": [1]}}, "histogram.counts"),
    ({"lengths": [5, 0]}, None),
    ({"lengths": [5], "devices": 1}, "devices"),
    ({"lengths": [5], "max_seq_len": 10**7, "token_budget": 10**7}, None),
])
def test_proposal_errors_name_the_field(client, space_document, extra, field):
    body = {"scheme_space": space_document, "devices": 16, "devices_per_node": 8, "token_budget": 65536,
            "max_seq_len": 16384, **extra}
    response = client.post("/v1/proposals", json=body)
    assert response.status_code == 422, response.text
    if field is not None:
        assert response.json()["error"]["field"] == field


def test_huge_numbers_are_422_naming_the_field(client, space_document):
    response = client.post("/v1/proposals", json={"scheme_space": space_document, "devices": 64,
                                                  "devices_per_node": 8, "token_budget": 1e19, "max_seq_len": 4096,
                                                  "lengths": [100, 200]})
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "token_budget"


def test_too_much_work_is_413(space_document):
    small = TestClient(create_app(ServiceSettings(max_device_strategies=128)))
    response = small.post("/v1/proposals", json={"scheme_space": space_document, "devices": 64, "devices_per_node": 8,
                                                 "token_budget": 65536, "max_seq_len": 4096, "lengths": [100],
                                                 "strategies": 4})
    assert response.status_code == 413
    assert response.json()["error"] == {
        "code": "too_much_work", "field": "strategies",
        "message": "devices × strategies = 64 × 4 = 256 exceeds this service's max_device_strategies = 128"}


def test_step_assignments_carry_the_ids_over_several_steps(client, example_proposal):
    from hydraulis.artifacts.assignments import (
        assignments_from_dict,
        assignments_schema,
    )
    from tests.artifacts.schema_check import violations

    steps = [{"samples": [{"id": f"s{k}-{i}", "length": n} for i, n in enumerate([30000, 12, 4096, 700, 20000, 1])]}
             for k in range(2)]
    response = client.post("/v1/step-assignments", json={"proposal": example_proposal, "steps": steps})
    assert response.status_code == 200, response.text
    documents = response.json()["steps"]
    assert [d["step"] for d in documents] == [0, 1]
    for document, step in zip(documents, steps):
        assert violations(document, assignments_schema()) == []
        assert assignments_from_dict(document).ids == tuple(s["id"] for s in step["samples"])
    single = client.post("/v1/step-assignments",
                         json={"proposal": example_proposal, "steps": steps, "single_strategy": True})
    assert single.status_code == 200
    assert len({d["strategy"]["index"] for d in single.json()["steps"]}) == 1


@pytest.mark.parametrize("change, field", [
    (lambda b: b.__setitem__("steps", []), None),
    (lambda b: b["steps"][0]["samples"][1].__setitem__("id", "a"), "samples[1].id"),
    (lambda b: b["steps"][0]["samples"][0].__setitem__("id", 1.5), None),
    (lambda b: b.update(single_strategy=True, synthesise="proposal"), "synthesise"),
])
def test_step_assignments_errors(client, example_proposal, change, field):
    body = {"proposal": example_proposal, "steps": [{"samples": [{"id": "a", "length": 100}, {"id": "b", "length": 7}]}]}
    change(body)
    response = client.post("/v1/step-assignments", json=body)
    assert response.status_code == 422
    if field is not None:
        assert response.json()["error"]["field"] == field

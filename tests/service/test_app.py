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

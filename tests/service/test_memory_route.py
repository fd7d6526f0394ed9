"""``POST /v1/memory``: the JSON of ``hydraulis memory --format json``, its schema's limits, bad
fields named (422) and devices beyond the service's limit."""

import json

import pytest
from fastapi.testclient import TestClient

from hydraulis.base import limits
from hydraulis.cli import main
from hydraulis.service.app import create_app
from hydraulis.service.settings import ServiceSettings

BODY = {"model": "tiny", "strategy": "1,2,2", "devices": 8, "devices_per_node": 4, "device": "cpu", "tokens": 256,
        "optimizer_layout": {"dp": 2, "tp": 2, "pp": 2}}


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app())


def test_answers_the_json_of_the_memory_command(client, capsys):
    response = client.post("/v1/memory", json=BODY)
    assert response.status_code == 200, response.text
    assert main(["memory", "--model", "tiny", "--strategy", "1,2,2", "--devices", "8", "--devices-per-node", "4",
                 "--device", "cpu", "--tokens", "256", "--optimizer-layout", "2,2,2", "--format", "json"]) == 0
    assert response.json() == json.loads(capsys.readouterr().out)
    report = response.json()
    assert report["kind"] == "memory_report" and report["tokens"] == [256]
    assert sorted(rank for members in report["classes"] for rank in members) == list(range(8))
    assert [r["stage"] for r in report["ranks"]][4:] == [None] * 4
    assert 0 < report["max_total_bytes"] < report["capacity_bytes"] < report["device_memory_bytes"]


def test_schema_states_the_limits(client):
    schema = client.get("/openapi.json").json()["components"]["schemas"]["MemoryRequest"]
    fields = schema["properties"]
    assert set(schema["required"]) == {"model", "strategy", "devices"}
    assert (fields["devices"]["minimum"], fields["devices"]["maximum"]) == (1, limits.DEVICES.maximum)
    assert fields["devices_per_node"]["maximum"] == limits.DEVICES_PER_NODE.maximum
    tokens = fields["tokens"]["anyOf"][0]
    assert (tokens["minimum"], tokens["maximum"]) == (1, limits.MAX_SEQ_LEN.maximum)


@pytest.mark.parametrize("change, field", [
    ({"tokens": 0}, "tokens"),
    ({"devices": 70_000}, "devices"),
    ({"model": "llama-8b"}, "model"),
    ({"device": "tpu-v9"}, "device"),
    ({"strategy": "1,2,2x3"}, "strategy"),
    ({"strategy": "1,3,1"}, "strategy"),
    ({"optimizer_layout": {"dp": 3, "tp": 1, "pp": 1}}, "optimizer_layout"),
    ({"optimizer_layout": {"dp": 2, "tp": 0, "pp": 1}}, "optimizer_layout.tp"),
    ({"colour": "red"}, "colour"),
])
def test_a_bad_field_is_422_naming_it(client, change, field):
    response = client.post("/v1/memory", json={**BODY, **change})
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"].startswith(field), response.json()


def test_devices_beyond_the_service_limit_are_refused():
    response = TestClient(create_app(ServiceSettings(max_devices=4))).post("/v1/memory", json=BODY)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["field"] == "devices" and "max_devices = 4" in error["message"]

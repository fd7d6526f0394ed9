"""The plan explorer's pages (offline assets, packaged) and the two routes it adds to the API."""

from __future__ import annotations

import copy
import re
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from hydraulis.artifacts import scheme_space_to_dict
from hydraulis.data.synth import LongTail, synth_lengths
from hydraulis.service.app import create_app
from hydraulis.service.pages import ASSETS
from hydraulis.service.settings import ServiceSettings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app())


def asset_names() -> list[str]:
    return sorted(entry.name for entry in ASSETS.iterdir())


@pytest.mark.parametrize("path", ["/", "/explorer"])
def test_page_is_served_with_a_same_origin_policy(client, path):
    response = client.get(path)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in response.headers["content-security-policy"]
    assert '<form id="plan-form"' in response.text


def test_every_referenced_asset_is_served_and_nothing_comes_from_elsewhere(client):
    texts = {name: ASSETS.joinpath(name).read_text(encoding="utf-8") for name in asset_names()}
    referenced = set(re.findall(r'(?:src|href)="/explorer/([\w.-]+)"', texts["index.html"]))
    for name, text in texts.items():
        referenced |= set(re.findall(r'from "\./([\w.-]+)"', text))
        assert not re.findall(r"https?://(?!www\.w3\.org/2000/svg)", text), name
    assert referenced and referenced <= set(texts)
    for name in referenced:
        response = client.get(f"/explorer/{name}")
        assert response.status_code == 200 and response.content == texts[name].encode()
    assert client.get("/explorer/explorer.js").headers["content-type"].startswith("text/javascript")
    assert client.get("/explorer/../app.py").status_code == 404
    assert client.get("/explorer/missing.js").json()["error"]["code"] == "not_found"


def test_every_asset_is_package_data():
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["hydraulis"]
    for name in asset_names():
        assert any(fnmatch(f"service/explorer/{name}", pattern) for pattern in patterns), name


def test_pages_need_no_token_the_api_does():
    guarded = TestClient(create_app(ServiceSettings(auth_token="explorer-token")))
    assert guarded.get("/").status_code == 200
    assert guarded.post("/v1/lengths/synthetic", json={"docs": 3}).status_code == 401


def test_synthetic_lengths_are_the_library_draw(client):
    response = client.post("/v1/lengths/synthetic", json={"docs": 500, "seed": 4, "tail_share": 0.1})
    assert response.status_code == 200
    assert response.json()["lengths"] == synth_lengths(500, LongTail(tail_share=0.1), 4).tolist()


@pytest.mark.parametrize("body, status, field", [
    ({"docs": 0}, 422, "docs"),
    ({"docs": 5, "tail_share": 2.0}, 422, "tail_share"),
    ({"docs": 5, "tail_start": 10, "max_len": 5}, 422, "max_len"),
    ({"docs": 11}, 413, "lengths"),
])
def test_synthetic_lengths_errors_name_the_field(body, status, field):
    response = TestClient(create_app(ServiceSettings(max_sequences=10))).post("/v1/lengths/synthetic", json=body)
    assert response.status_code == status
    assert response.json()["error"]["field"] == field


@pytest.fixture(scope="module")
def comparison_body(space_7b) -> dict:
    import json

    proposal = json.loads((ROOT / "examples" / "proposals" / "7b_64dev.json").read_text())
    return {"scheme_space": scheme_space_to_dict(space_7b), "proposal": proposal,
            "lengths": synth_lengths(2000, seed=1).tolist(), "seed": 2}


def test_step_comparison_document(client, comparison_body):
    response = client.post("/v1/step-comparisons", json=comparison_body)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["kind"] == "step_comparison" and body["seed"] == 2
    assert body["tokens"] == sum(body["lengths"]) <= comparison_body["proposal"]["token_budget"]
    assert [c["name"] for c in body["contenders"]][0] == "hydraulis" and body["contenders"][0]["speedup"] == 1.0
    assert len(body["contenders"]) == 9
    pipelines = body["plan"]["pipelines"]
    assert len(body["timelines"]) == len(pipelines)
    for pipeline, timeline in zip(pipelines, body["timelines"]):
        columns = timeline["ops"]
        assert {len(column) for column in columns.values()} == {2 * pipeline["scheme"]["pp"] *
                                                                len(pipeline["micro_batches"])}
        assert len(timeline["micro_batch_ms"]) == len(pipeline["micro_batches"])
        assert set(columns["phase"]) <= {"F", "B"}


@pytest.mark.parametrize("change, field", [
    (lambda b: b.__setitem__("seed", -1), "seed"),
    (lambda b: b.pop("lengths"), "lengths"),
    (lambda b: b.__setitem__("lengths", [5, 0]), None),
    (lambda b: b["proposal"].pop("strategies"), "strategies"),
    (lambda b: b["scheme_space"]["schemes"][0].__setitem__("a", -1), "schemes[0].a"),
])
def test_step_comparison_errors_name_the_field(client, comparison_body, change, field):
    body = copy.deepcopy(comparison_body)
    change(body)
    response = client.post("/v1/step-comparisons", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == field or field is None

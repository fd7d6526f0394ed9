import json

import pytest

from hydraulis.artifacts import read_scheme_space, scheme_space_from_dict, scheme_space_to_dict, write_scheme_space
from hydraulis.base.errors import HydraulisError
from hydraulis.base.presets import device_preset
from hydraulis.base.types import FitQuality, SchemeProfile


@pytest.mark.parametrize("fixture", ["space_7b", "space_13b", "space_32b_analytic"])
def test_round_trip_is_exact(fixture, request, tmp_path):
    space = request.getfixturevalue(fixture)
    path = tmp_path / "space.json"
    write_scheme_space(path, space)
    assert read_scheme_space(path) == space
    assert scheme_space_to_dict(read_scheme_space(path)) == json.loads(path.read_text())


def test_round_trip_keeps_fit_quality(space_7b):
    first = space_7b.profiles[0]
    fitted = SchemeProfile(first.scheme, first.time, first.activation_bytes_per_token, first.overhead_bytes,
                           first.utilization_tokens, FitQuality(0.99, 0.03, 0.12, 40))
    space = type(space_7b)(**{**space_7b.__dict__, "profiles": (fitted,) + space_7b.profiles[1:]})
    assert scheme_space_from_dict(json.loads(json.dumps(scheme_space_to_dict(space)))) == space


def _document(space) -> dict:
    return json.loads(json.dumps(scheme_space_to_dict(space)))


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["schemes"][2].__setitem__("a", -1.0), r"schemes\[2\]\.a: -1\.0 must be >= 0"),
    (lambda d: d["schemes"][0].pop("b"), r"schemes\[0\]\.b: None is missing"),
    (lambda d: d["schemes"][3].__setitem__("tp", 3), r"schemes\[3\]\.tp: 3 does not divide model.heads = 32"),
    (lambda d: d["schemes"][1].__setitem__("pp", 64), r"schemes\[1\]\.pp: 64 exceeds model.layers = 32"),
    (lambda d: d["schemes"][1].__setitem__("c", "fast"), r"schemes\[1\]\.c: 'fast' must be a number"),
    (lambda d: d.__setitem__("schema_version", 99), r"schema_version: 99 is not supported"),
    (lambda d: d.__setitem__("kind", "proposal"), r"kind: 'proposal' is not a scheme_space artifact"),
    (lambda d: d["provenance"].__setitem__("source", "guessed"), r"provenance.source: 'guessed' must be one of"),
    (lambda d: d["model"].__setitem__("layers", 0), r"model.layers: 0 must be >= 1"),
    (lambda d: d["memory"].__setitem__("sharded_state_fraction", 1.5), r"memory.sharded_state_fraction: 1.5 must be <= 1.0"),
    (lambda d: d.__setitem__("schemes", []), r"schemes: \[\] must list at least one scheme"),
    (lambda d: d["schemes"].append(dict(d["schemes"][0])), r"schemes\[13\]: '\(1,1,2\)' is listed twice"),
])
def test_invalid_documents_name_the_field(space_7b, mutate, message):
    document = _document(space_7b)
    mutate(document)
    with pytest.raises(HydraulisError, match=message):
        scheme_space_from_dict(document)


def test_malformed_and_missing_files(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text("{ not json")
    with pytest.raises(HydraulisError, match="is not valid JSON"):
        read_scheme_space(broken)
    with pytest.raises(HydraulisError, match="does not exist"):
        read_scheme_space(tmp_path / "nowhere.json")
    with pytest.raises(HydraulisError, match="document: .* must be a JSON object"):
        scheme_space_from_dict([1, 2])


def test_options_make_other_schemes_and_round_trip(space_7b):
    from dataclasses import replace

    from hydraulis.base.types import Recompute

    first = space_7b.profiles[1]
    variants = tuple(replace(first, scheme=replace(first.scheme, tp=2, sp=sp, recompute=recompute, recompute_layers=k))
                     for sp, recompute, k in ((True, Recompute.NONE, ()), (True, Recompute.FULL, ()),
                                              (False, Recompute.SELECTIVE, ()), (False, Recompute.FULL, (3,))))
    space = replace(space_7b, profiles=space_7b.profiles + variants)
    document = _document(space)
    assert [{k: s[k] for k in ("sp", "recompute", "recompute_layers") if k in s} for s in document["schemes"][-4:]] == [
        {"sp": True}, {"sp": True, "recompute": "full"}, {"recompute": "selective"},
        {"recompute": "full", "recompute_layers": [3]}]
    assert "sp" not in document["schemes"][0] and "recompute" not in document["schemes"][0]
    assert scheme_space_from_dict(document) == space


def test_a_version_1_file_loads_with_the_default_options(space_7b):
    document = _document(space_7b)
    document["schema_version"] = 1
    space = scheme_space_from_dict(document)
    assert space == space_7b
    assert all(not p.scheme.sp and not p.scheme.options for p in space.profiles)


def test_an_unknown_recompute_value_names_the_field(space_7b):
    document = _document(space_7b)
    document["schemes"][0]["recompute"] = "half"
    with pytest.raises(HydraulisError, match=r"schemes\[0\]\.recompute: 'half' must be one of none, selective, full"):
        scheme_space_from_dict(document)


def _variant_space():
    from hydraulis.base.presets import device_preset, model_preset
    from hydraulis.base.types import Cluster
    from hydraulis.profiler.analytic import analytic_scheme_space

    return analytic_scheme_space(model_preset("llama-7b"), device_preset("h100-80g"), Cluster(16, 8, "h100-80g"),
                                 (1, 2), (1, 2), (1, 2), "2026-01-01T00:00:00+00:00", "test", segments=True)


def test_a_space_with_segments_round_trips_and_composes_its_variants(tmp_path):
    from hydraulis.base.types import Recompute, Scheme

    space = _variant_space()
    path = tmp_path / "space.json"
    write_scheme_space(path, space)
    document = json.loads(path.read_text())
    assert document["schema_version"] == 3 and len(document["segments"]) == 6
    assert set(document["segments"][0]) == {"cp", "tp", "sp", "layer", "selective", "full", "first", "middle",
                                            "last", "only", "network_hand_off"}
    assert {"input_bytes_per_token", "released_bytes_per_token"} <= set(document["segments"][0]["last"])
    assert "input_bytes_per_token" not in document["segments"][0]["layer"]
    loaded = read_scheme_space(path)
    assert loaded == space and loaded.has_variants
    variant = Scheme(1, 2, 2, True, Recompute.FULL, (4, 1))
    assert loaded.profile(variant).activation_bytes_per_token < loaded.profile(Scheme(1, 2, 2)).activation_bytes_per_token


def test_a_version_2_file_loads_without_segments(space_7b):
    document = _document(space_7b)
    document["schema_version"] = 2
    space = scheme_space_from_dict(document)
    assert space == space_7b and not space.has_variants


def test_segments_missing_a_block_or_not_monotone_name_the_field():
    document = _document(_variant_space())
    document["segments"][1].pop("full")
    with pytest.raises(HydraulisError, match=r"segments\[1\]\.full"):
        scheme_space_from_dict(document)
    document = _document(_variant_space())
    document["segments"][0]["full"]["b"] = 0.0
    with pytest.raises(HydraulisError, match=r"segments\[0\]\.b: 0\.0 \(full recomputation\) must be >= the layer's"):
        scheme_space_from_dict(document)


def test_a_file_without_the_overlap_takes_its_device_presets_and_2_byte_gradients(space_7b):
    document = _document(space_7b)
    del document["reduce_overlap"], document["grad_reduce_bytes"]
    assert scheme_space_from_dict(document).grad_reduce_bytes == 2
    device = space_7b.cluster.device
    assert scheme_space_from_dict(document).reduce_overlap == device_preset(device).reduce_overlap > 0
    document["cluster"]["device"] = "made-up"
    assert scheme_space_from_dict(document).reduce_overlap == 0.0

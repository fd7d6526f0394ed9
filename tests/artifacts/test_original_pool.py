import pytest

from hydraulis.artifacts.original_pool import import_original_pool
from hydraulis.base.errors import HydraulisError
from hydraulis.base.presets import model_preset
from hydraulis.base.types import Scheme, SpaceSource
from tests.conftest import load_pool


def test_import_maps_every_field(space_7b):
    pool = load_pool("7b")
    assert len(space_7b.profiles) == len(pool["strategies"])
    first = pool["strategies"][0]
    profile = space_7b.profile(Scheme(1, first["tp"], first["pp"]))
    assert (profile.time.a, profile.time.b, profile.time.c) == (first["a"], first["b"], first["c"])
    assert profile.activation_bytes_per_token == 32 * 4096 / first["tp"] * pool["memory_regression"]["A"]["tp1"]
    assert profile.utilization_tokens == 384
    assert space_7b.memory.layer_state_bytes == 210 * 4096**2
    assert space_7b.model.name == "llama-7b" and space_7b.model.vocab == 30592
    assert space_7b.provenance.source is SpaceSource.IMPORTED
    assert all(p.scheme.cp == 1 for p in space_7b.profiles)


def test_shape_mismatch_is_named():
    with pytest.raises(HydraulisError, match="model_config.H: 4096 differs from model llama-13b"):
        import_original_pool(load_pool("7b"), model_preset("llama-13b"), 64, "a800-80g", 25.0, "now", "test")


def test_missing_activation_entry_is_named():
    pool = load_pool("7b")
    del pool["memory_regression"]["A"]["tp4"]
    with pytest.raises(HydraulisError, match=r"memory_regression.A.tp4: None is missing"):
        import_original_pool(pool, model_preset("llama-7b").__class__(**{**model_preset("llama-7b").__dict__,
                                                                          "vocab": 30592}),
                              64, "a800-80g", 25.0, "now", "test")

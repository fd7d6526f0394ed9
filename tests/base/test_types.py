import pytest

from hydraulis.base.errors import HydraulisError
from hydraulis.base.presets import device_preset, model_preset
from hydraulis.base.types import BatchingMethod, MicroBatch, OptimizerLayout, Recompute, Scheme, TimeCoefficients


def test_scheme_devices_and_text():
    assert Scheme(2, 4, 8).devices == 64
    assert str(Scheme(1, 8, 1)) == "(1,8,1)"


@pytest.mark.parametrize("field, kwargs", [("scheme.cp", dict(cp=0, tp=1, pp=1)),
                                           ("scheme.tp", dict(cp=1, tp=-2, pp=1)),
                                           ("scheme.pp", dict(cp=1, tp=1, pp=1.5))])
def test_scheme_rejects_non_positive_degrees(field, kwargs):
    with pytest.raises(HydraulisError) as caught:
        Scheme(**kwargs)
    assert caught.value.field == field


def test_recompute_layers_count_full_layers_per_stage():
    full = Recompute.FULL
    assert Scheme(1, 1, 2, recompute=full, recompute_layers=(3, 3)) == Scheme(1, 1, 2, recompute=full,
                                                                              recompute_layers=(3,))
    assert str(Scheme(1, 2, 2, True, full, (3, 1))) == "(1,2,2)[sp,recompute=full:3/1]"
    scheme = Scheme(1, 1, 2, recompute=full, recompute_layers=(3, 1))
    assert scheme.stage_recompute(1, 2) == (full, Recompute.NONE)
    assert Scheme(1, 1, 2, recompute=full).full_layers(0, 16) == 16
    assert Scheme(1, 1, 2, recompute=Recompute.SELECTIVE).full_layers(0, 16) == 0
    with pytest.raises(HydraulisError, match="needs recompute = full"):
        Scheme(1, 1, 1, recompute=Recompute.SELECTIVE, recompute_layers=(1,))
    with pytest.raises(HydraulisError, match="recomputes 3 layers of stage 1, which holds 2"):
        model_preset("tiny").check_scheme(Scheme(1, 1, 2, recompute=full, recompute_layers=(1, 3)))


def test_model_checks_scheme_against_heads_and_layers():
    model = model_preset("llama-7b")
    with pytest.raises(HydraulisError, match=r"scheme.tp: 3 does not divide model.heads = 32"):
        model.check_scheme(Scheme(1, 3, 1))
    with pytest.raises(HydraulisError, match=r"scheme.pp: 33 exceeds model.layers = 32"):
        model.check_scheme(Scheme(1, 1, 33))
    model.check_scheme(Scheme(4, 8, 4))


def test_model_parameter_count_matches_llama_7b():
    assert model_preset("llama-7b").params == pytest.approx(6.74e9, rel=0.01)
    assert model_preset("llama-70b").params == pytest.approx(69.0e9, rel=0.02)


def test_optimizer_layout_must_divide_devices():
    model = model_preset("llama-7b")
    OptimizerLayout(8, 4, 1).check(model, 64)
    with pytest.raises(HydraulisError, match="does not divide the 48 devices"):
        OptimizerLayout(8, 4, 1).check(model, 48)


def test_unknown_presets_name_the_choices():
    with pytest.raises(HydraulisError, match="llama-7b"):
        model_preset("gpt-5")
    with pytest.raises(HydraulisError, match="h100-80g"):
        device_preset("tpu")


def test_negative_coefficient_is_rejected():
    with pytest.raises(HydraulisError, match="a: -1.0 must be >= 0"):
        TimeCoefficients(a=-1.0, b=0.1, c=1.0)


def test_cu_seqlens_with_alignment():
    mb = MicroBatch(sequences=(3, 0), lengths=(5, 9))
    assert mb.tokens == 14
    assert mb.cu_seqlens() == (0, 5, 14)
    assert mb.cu_seqlens(8) == (0, 8, 24)


def test_batching_methods_are_the_four_of_the_paper():
    assert [m.value for m in BatchingMethod] == [
        "padding", "fixed_packing", "dispatch_fixed_packing", "dispatch_balanced_packing"]

"""Staged schemes: per-stage tp, layer counts and device groups (hydraulis.base.stages, Scheme.stages)."""

import pytest

from hydraulis.artifacts.record import Record
from hydraulis.artifacts.scheme_space import scheme_from_record, scheme_to_dict
from hydraulis.base.errors import HydraulisError
from hydraulis.base.presets import model_preset
from hydraulis.base.stages import Stage, parse_stages, stages_text
from hydraulis.base.types import Recompute, Scheme


def test_a_staged_scheme_counts_its_devices_stage_by_stage():
    scheme = Scheme.staged(*parse_stages("2|4:20@h100>2:12@a100"))
    assert (scheme.cp, scheme.tp, scheme.pp, scheme.devices) == (2, 4, 2, 12)
    assert scheme.stage_layers(32) == (20, 12)
    assert [scheme.stage_tp(s) for s in range(2)] == [4, 2]
    assert str(scheme) == "(2|4:20@h100>2:12@a100)"
    model_preset("llama-7b").check_scheme(scheme)


def test_the_text_form_round_trips_and_artifacts_keep_the_stages():
    text = "1|2:3@a>1:1"
    assert stages_text(*parse_stages(text)) == text
    scheme = Scheme.staged(*parse_stages(text), recompute=Recompute.FULL, recompute_layers=(1, 1))
    assert scheme_from_record(Record(scheme_to_dict(scheme))) == scheme
    assert "stages" not in scheme_to_dict(Scheme(1, 2, 2))


def test_a_plain_scheme_splits_its_layers_evenly():
    assert Scheme(1, 2, 3).stage_layers(8) == (3, 3, 2)
    assert Scheme(1, 2, 3).devices == 6 and not Scheme(1, 2, 3).is_staged


@pytest.mark.parametrize(("text", "field"), [
    ("1|3:20>2:12", "scheme.stages[0].tp"),
    ("1|4:20>2:11", "scheme.stages"),
])
def test_the_model_rejects_stages_it_cannot_hold(text, field):
    with pytest.raises(HydraulisError) as error:
        model_preset("llama-7b").check_scheme(Scheme.staged(*parse_stages(text)))
    assert error.value.field == field


@pytest.mark.parametrize(("text", "field"), [
    ("4:20>2:12", "stages"),
    ("1|4:20>two", "stages[1]"),
    ("1|0:20", "stages[0].tp"),
    ("1|4:0", "stages[0].layers"),
])
def test_bad_text_names_the_stage(text, field):
    with pytest.raises(HydraulisError) as error:
        parse_stages(text)
    assert error.value.field == field


def test_a_staged_scheme_rejects_inconsistent_degrees():
    stages = (Stage(4, 2), Stage(2, 2))
    with pytest.raises(HydraulisError, match="scheme.tp"):
        Scheme(1, 2, 2, stages=stages)
    with pytest.raises(HydraulisError, match="pp = 3"):
        Scheme(1, 4, 3, stages=stages)
    with pytest.raises(HydraulisError, match="scheme.sp"):
        Scheme(1, 4, 2, sp=True, stages=stages)

"""Strategy SPECs: the grammar, stage splits, and errors that name the offending pipeline."""

import pytest

from hydraulis.base.errors import HydraulisError
from hydraulis.base.presets import model_preset
from hydraulis.base.stages import Stage, even_split
from hydraulis.base.types import PipelineGroup, Recompute, Scheme, Strategy
from hydraulis.job.strategy_spec import SpecGroup, parse_strategy, parse_strategy_spec, scheme_times
from hydraulis.sharding.pipeline import PipelineSplit, even_strategy_split

TINY = model_preset("tiny")
TIMES = scheme_times(TINY, 4)


def test_groups_in_order_with_counts_and_splits():
    assert parse_strategy_spec("1,2,1+1,1,2") == (SpecGroup(Scheme(1, 2, 1), 1), SpecGroup(Scheme(1, 1, 2), 1))
    assert parse_strategy_spec(" 1,1,2 x2 ") == (SpecGroup(Scheme(1, 1, 2), 2),)
    assert parse_strategy_spec("1,1,2:3/1x2") == (SpecGroup(Scheme(1, 1, 2), 2, (3, 1)),)


def test_options_in_brackets_make_other_schemes():
    assert parse_strategy_spec("1,4,1[sp]x2") == (SpecGroup(Scheme(1, 4, 1, sp=True), 2),)
    full, selective = parse_strategy_spec("2,2,1[sp,recompute=full]+1,1,2:3/1[recompute=selective]")
    assert full == SpecGroup(Scheme(2, 2, 1, True, Recompute.FULL), 1)
    assert selective == SpecGroup(Scheme(1, 1, 2, recompute=Recompute.SELECTIVE), 1, (3, 1))
    assert parse_strategy_spec("1,1,2[recompute=full]:3/1") == parse_strategy_spec("1,1,2:3/1[recompute=full]")
    assert parse_strategy_spec("1,2,1[]") == parse_strategy_spec("1,2,1")


def test_full_recomputation_of_k_layers_per_stage():
    (uniform,) = parse_strategy_spec("1,1,2[recompute=full:1]")
    assert uniform.scheme == Scheme(1, 1, 2, recompute=Recompute.FULL, recompute_layers=(1,))
    assert parse_strategy_spec("1,1,2[recompute=full:1/1]") == (uniform,)
    (per_stage,) = parse_strategy_spec("1,2,2[sp,recompute=full:2/1]")
    assert per_stage.scheme.recompute_layers == (2, 1)
    layout = parse_strategy("1,1,2[recompute=full:2/1]", TINY, TIMES, 64).pipelines[0]
    assert [layout.scheme.stage_recompute(s, 2) for s in (0, 1)] == [
        (Recompute.FULL, Recompute.FULL), (Recompute.FULL, Recompute.NONE)]


@pytest.mark.parametrize("text", ["1,2,1+1,1,2", "1,1,2x2", "2,1,1+1,1,1x2", "1,1,2:3/1+1,2,1", "1,1,1x2+1,1,2",
                                  "1,2,1[sp]x2+1,1,2:3/1[recompute=full]", "1,2,1[sp,recompute=selective]+1,2,1",
                                  "1,1,2:3/1[recompute=full:2/1]+1,2,1[sp,recompute=full:3]",
                                  "1|2:3>1:1+1,1,1", "1|2:1>1:3x2", "1,1,1+1|1:2>2:1>1:1[recompute=full:1]x2",
                                  "1|2:2@h100>1:2@a100x2+1,2,1", "2|2:3>1:1[recompute=selective]"])
def test_layout_prints_back_as_its_spec(text):
    assert str(parse_strategy(text, TINY, TIMES, 64)) == text


def test_staged_pipelines_carry_their_stages_and_split():
    assert parse_strategy_spec("1|2:3>1:1+1,1,1x2") == (
        SpecGroup(Scheme.staged(1, (Stage(2, 3), Stage(1, 1))), 1), SpecGroup(Scheme(1, 1, 1), 2))
    (group,) = parse_strategy_spec("1|2:1@h100>1:3[recompute=full:1]x2")
    assert group.count == 2 and group.scheme.stages == (Stage(2, 1, "h100"), Stage(1, 3))
    assert group.scheme.recompute_layers == (1,)
    layout = parse_strategy("1|2:1>1:3x2+1,1,1", TINY, TIMES, 64)
    assert [p.stage_layers for p in layout.pipelines] == [(1, 3), (1, 3), (4,)]
    assert layout.devices == 7


def test_expanded_pipelines_carry_even_or_given_splits():
    layout = parse_strategy("1,1,2:3/1+1,1,3x2", TINY, TIMES, 64)
    assert [p.stage_layers for p in layout.pipelines] == [(3, 1), (2, 1, 1), (2, 1, 1)]
    assert layout.devices == 8
    assert layout.strategy.pipelines[1].count == 2
    assert layout.pipelines[1].stage_range(1) == range(2, 3)


def test_even_split_gives_the_first_stages_the_remainder():
    assert even_split(4, 3) == (2, 1, 1)
    assert even_split(60, 8) == (8, 8, 8, 8, 7, 7, 7, 7)
    assert PipelineSplit(Scheme(1, 1, 2), (2, 2)).is_even()


@pytest.mark.parametrize("text, field, words", [
    ("", "strategy", "pipelines joined by '+'"),
    ("1,2", "strategy", "pipeline 1 ('1,2')"),
    ("1,1,1+1,x,1", "strategy", "pipeline 2"),
    ("1,1,1x0", "strategy[0].count", ">= 1"),
    ("0,1,1", "strategy[0].cp", "must be between 1 and 65536"),
    ("1,1,2:4", "strategy[0].stage_layers", "one layer count per stage"),
    ("1,2,1[tp]", "strategy[0].options", "is not an option: sp, or recompute=none|selective|full"),
    ("1,2,1[recompute=some]", "strategy[0].options", "is not an option"),
    ("1,2,1[sp,sp]", "strategy[0].options", "is given twice"),
    ("1,2,1[sp]:1/1[sp]", "strategy[0].options", "gives options twice"),
    ("1,1,1+1,1,2[sp]", "strategy[1].sp", "needs scheme.tp > 1"),
    ("1,1,2:3[recompute=full]", "strategy[0].stage_layers", "one layer count per stage"),
    ("1,1,2[recompute=selective:1]", "strategy[0].options", "is not an option"),
    ("1,1,2[recompute=full:x]", "strategy[0].options", "is not an option"),
    ("1,1,2[recompute=full:0]", "strategy[0].recompute_layers", "recomputes no layer"),
    ("1,1,2[recompute=full:1/1/1]", "strategy[0].recompute_layers", "one per stage (pp = 2)"),
    ("1|2:3>1:1[sp]", "strategy[0].sp", "not supported with per-stage tp"),
    ("1,1,1+1|2:3>0:1", "strategy[1].stages[1].tp", "must be between 1 and 65536"),
    ("1|2:3>:1", "strategy[0].stages[1]", "must be TP:LAYERS"),
    ("1|2:3>1:1x0", "strategy[0].count", ">= 1"),
    ("1|2:3>1:1[recompute=full:1/1/1]", "strategy[0].recompute_layers", "one per stage (pp = 2)"),
])
def test_malformed_specs_name_the_pipeline(text, field, words):
    with pytest.raises(HydraulisError) as error:
        parse_strategy_spec(text)
    assert error.value.field == field
    assert words in str(error.value)


@pytest.mark.parametrize("text, words", [
    ("1,3,1", "does not divide model.heads"),
    ("1,1,5", "exceeds model.layers"),
    ("1,1,2:2/1", "must sum to model.layers = 4"),
    ("1,1,2[recompute=full:3]", "recomputes 3 layers of stage 0, which holds 2"),
    ("1,1,2:3/1[recompute=full:2]", "recomputes 2 layers of stage 1, which holds 1"),
    ("1|2:3>1:2", "hold 5 layers in all, not model.layers = 4"),
    ("1|2:2>3:2", "3 does not divide model.heads = 4"),
])
def test_specs_the_model_cannot_run_are_refused(text, words):
    with pytest.raises(HydraulisError) as error:
        parse_strategy(text, TINY, TIMES, 64)
    assert text in error.value.field and words in str(error.value)


def test_times_come_from_a_space_when_given(space_7b):
    with pytest.raises(HydraulisError, match="differs from the trained model"):
        scheme_times(TINY, 4, space_7b)
    scheme = space_7b.profiles[0].scheme
    assert scheme_times(space_7b.model, 64, space_7b)(scheme) == space_7b.profiles[0].time


def test_a_proposal_strategy_keeps_its_staged_split():
    staged = Scheme.staged(1, (Stage(2, 3), Stage(1, 1)))
    strategy = Strategy((PipelineGroup(staged, 1, 64, TIMES(staged)), PipelineGroup(Scheme(1, 1, 2), 1, 64,
                                                                                     TIMES(Scheme(1, 1, 2)))))
    layout = even_strategy_split(strategy, TINY)
    assert [p.stage_layers for p in layout.pipelines] == [(3, 1), (2, 2)]
    assert str(layout) == "1|2:3>1:1+1,1,2"

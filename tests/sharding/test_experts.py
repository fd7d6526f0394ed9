"""A mixture of experts' parameters: every element counted once, routed experts held whole by
their expert-parallel tp rank, their optimizer states spread over the optimizer layout's tp ranks."""

import pytest

from hydraulis.base.presets import model_preset
from hydraulis.base.types import OptimizerLayout, Scheme
from hydraulis.sharding.ownership import OptimizerOwnership
from hydraulis.sharding.parameters import held, parameter_specs, stage_shards
from hydraulis.sharding.pipeline import PipelineSplit
from hydraulis.sharding.states import held_elements, layer_elements


@pytest.mark.parametrize("name", ["tiny-moe", "mixtral-8x7b", "qwen3-30b-a3b", "deepseek-moe-16b"])
def test_the_specs_count_every_parameter_once(name):
    model = model_preset(name)
    assert sum(spec.numel for spec in parameter_specs(model)) == model.params
    assert layer_elements(model, Scheme(1, 1, 1), 0) == model.params_per_layer


def test_each_tp_rank_holds_its_experts_whole_and_shares_the_rest():
    model = model_preset("tiny-moe")
    layout = PipelineSplit(Scheme(1, 4, 1, True, ep=2), (model.layers,))
    experts = {rank: {s.spec.expert for s in stage_shards(model, layout, 0, rank) if s.spec.expert is not None}
               for rank in range(4)}
    assert experts == {0: {0, 1}, 1: {2, 3}, 2: {0, 1}, 3: {2, 3}}
    shards = [s for s in stage_shards(model, layout, 0, 1) if s.spec.expert is not None]
    assert all(s.dim is None and s.contributes for s in shards)
    routed = model.routed_params_per_layer * model.layers
    assert held_elements(model, PipelineSplit(Scheme(1, 4, 1, True), (model.layers,)), 0, 1) \
        - held_elements(model, layout, 0, 1) == routed // 2
    spec = next(s for s in parameter_specs(model) if s.expert == 3)
    assert [held(spec, layout.scheme, rank) for rank in range(4)] == [False, True, False, True]


def test_the_optimizer_layout_spreads_the_experts_over_its_tp_ranks():
    model = model_preset("tiny-moe")
    placement = OptimizerOwnership(model, OptimizerLayout(1, 2, 1), 2)
    sizes = [placement.buffer_size(rank) for rank in range(2)]
    assert sum(sizes) == model.params
    assert abs(sizes[0] - sizes[1]) < model.expert_params * model.layers

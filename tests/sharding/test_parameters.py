"""Shards: every element of every parameter is held, by the right ranks, in the model's shapes."""

import pytest
import torch

from hydraulis.base.presets import model_preset
from hydraulis.base.types import Scheme
from hydraulis.runtime.model.decoder import StageModel
from hydraulis.runtime.optimizer.master import initial_weights
from hydraulis.runtime.parallel.group import ParallelGroup
from hydraulis.sharding.parameters import parameter_specs, stage_shards, unit_range
from hydraulis.sharding.pipeline import PipelineSplit

TINY = model_preset("tiny")


def test_canonical_parameters_count_the_model():
    assert sum(spec.numel for spec in parameter_specs(TINY)) == TINY.params


def test_unit_range_worked_example():
    assert [unit_range(2, 4, r) for r in range(4)] == [(0, 1), (0, 1), (1, 1), (1, 1)]
    assert [unit_range(4, 2, r) for r in range(2)] == [(0, 2), (2, 2)]


@pytest.mark.parametrize("tp, pp", [(1, 1), (2, 1), (4, 1), (2, 2), (1, 3)])
def test_shards_cover_every_element_as_often_as_the_layout_holds_it(tp, pp):
    layout = PipelineSplit(Scheme(1, tp, pp), (2, 1, 1) if pp == 3 else (4 // pp,) * pp)
    held = {spec.name: torch.zeros(spec.shape) for spec in parameter_specs(TINY)}
    contributed = {spec.name: torch.zeros(spec.shape) for spec in parameter_specs(TINY)}
    for stage in range(pp):
        for rank in range(tp):
            for shard in stage_shards(TINY, layout, stage, rank):
                shard.of(held[shard.name]).add_(1)
                if shard.contributes:
                    shard.of(contributed[shard.name]).add_(1)
    for spec in parameter_specs(TINY):
        copies = tp if spec.tp_dim is None else max(1, tp // spec.units)
        assert torch.all(held[spec.name] == copies), spec.name
        expected = 1 if spec.tp_dim is None else copies
        assert torch.all(contributed[spec.name] == expected), spec.name


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_stage_model_parameters_have_the_shard_shapes(tp):
    layout = PipelineSplit(Scheme(1, tp, 2), (3, 1))
    full = initial_weights(TINY, 0)
    for stage in range(2):
        for rank in range(tp):
            group = ParallelGroup(None, tp, rank)
            model = StageModel(TINY, layout, stage, group, ParallelGroup.single(), torch.float32, torch.device("cpu"))
            shards = stage_shards(TINY, layout, stage, rank)
            params = model.shard_parameters(shards)
            assert [tuple(p.shape) for p in params] == [shard.shape for shard in shards]
            for param, shard in zip(params, shards):
                param.data.copy_(shard.of(full[shard.name]))
            assert dict(model.named_parameters())[shards[-1].name] is params[-1]


def test_rank_with_fewer_kv_heads_than_tp_holds_the_head_of_its_queries():
    layout = PipelineSplit(Scheme(1, 4, 1), (4,))
    for rank in range(4):
        shards = {s.name: s for s in stage_shards(TINY, layout, 0, rank)}
        q, k = shards["layers.0.attn.wq.weight"], shards["layers.0.attn.wk.weight"]
        first_query_head = q.start // TINY.head_dim
        assert k.start // TINY.head_dim == first_query_head // (TINY.heads // TINY.kv_heads)

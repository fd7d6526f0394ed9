"""The optimizer layout's placement: every element owned once, ``locate`` inverts the buffers,
the docstring's worked example, compute shards addressed in their own order."""

import numpy as np
import pytest

from hydraulis.errors import HydraulisError
from hydraulis.presets import model_preset
from hydraulis.runtime.layout import PipelineLayout, even_split
from hydraulis.runtime.optimizer.placement import OptimizerPlacement, shard_indices
from hydraulis.runtime.optimizer.sharding import parameter_specs, stage_shards
from hydraulis.types import OptimizerLayout, Scheme

TINY = model_preset("tiny")
LAYOUTS = [(1, 1, 1, 1), (4, 1, 1, 4), (2, 1, 2, 4), (1, 4, 1, 4), (1, 2, 2, 4), (3, 1, 1, 3), (2, 1, 1, 4),
           (1, 1, 4, 4), (2, 2, 1, 8)]


@pytest.mark.parametrize("dp, tp, pp, world", LAYOUTS)
def test_every_element_has_one_owner_and_locate_inverts_the_buffers(dp, tp, pp, world):
    placement = OptimizerPlacement(TINY, OptimizerLayout(dp, tp, pp), world)
    seen = {spec.name: np.zeros(spec.numel, dtype=np.int64) for spec in placement.specs}
    for rank in range(world):
        size = placement.buffer_size(rank)
        covered = 0
        for run in placement.owned_runs(rank):
            assert run.offset == covered
            covered += run.indices.size
            np.add.at(seen[run.spec.name], run.indices, 1)
            owner, position = placement.locate(run.spec, run.indices)
            assert (owner == rank).all()
            assert np.array_equal(position, np.arange(run.offset, run.offset + run.indices.size))
        assert covered == size
    assert all((counts == 1).all() for counts in seen.values())
    sizes = [placement.buffer_size(r) for r in range(placement.owners)]
    assert sum(sizes) == TINY.params
    assert all(placement.buffer_size(r) == 0 for r in range(placement.owners, world))


def test_worked_example_of_the_docstring():
    placement = OptimizerPlacement(TINY, OptimizerLayout(2, 1, 2), 4)
    assert [placement.buffer_size(r) for r in range(4)] == [78976, 78976, 79008, 79008]
    assert [run.spec.name for run in placement.owned_runs(0)][:2] == ["embed.weight", "layers.0.attn_norm.weight"]
    assert placement.owned_runs(3)[-1].spec.name == "head.weight"


def test_replicated_kv_heads_and_norms_have_one_owner():
    placement = OptimizerPlacement(TINY, OptimizerLayout(1, 4, 1), 4)
    wk = next(s for s in placement.specs if s.name == "layers.0.attn.wk.weight")
    owner, _ = placement.locate(wk, np.arange(wk.numel))
    assert sorted(set(owner.tolist())) == [0, 2]
    norm = next(s for s in placement.specs if s.name == "norm.weight")
    assert set(placement.locate(norm, np.arange(norm.numel))[0].tolist()) == {0}


def test_a_layout_that_does_not_divide_the_world_is_an_error():
    with pytest.raises(HydraulisError, match="does not divide"):
        OptimizerPlacement(TINY, OptimizerLayout(3, 1, 1), 4)


@pytest.mark.parametrize("scheme", [Scheme(1, 2, 1), Scheme(1, 4, 2), Scheme(2, 1, 2)])
def test_shard_indices_follow_the_shards_own_flattening(scheme):
    layout = PipelineLayout(scheme, even_split(TINY.layers, scheme.pp))
    full = {spec.name: np.arange(spec.numel).reshape(spec.shape) for spec in parameter_specs(TINY)}
    for stage in range(scheme.pp):
        for tp_rank in range(scheme.tp):
            for shard in stage_shards(TINY, layout, stage, tp_rank):
                expected = shard.of(full[shard.name]).reshape(-1) if shard.dim is None else \
                    np.take(full[shard.name], range(shard.start, shard.start + shard.length), axis=shard.dim).reshape(-1)
                assert np.array_equal(shard_indices(shard), expected)

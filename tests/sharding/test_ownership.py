"""The optimizer layout's placement: every element owned once, buffers tiled by their regions,
``owner_regions`` and ``owned_regions`` agree, the docstring's worked example."""

import numpy as np
import pytest

from hydraulis.base.errors import HydraulisError
from hydraulis.base.presets import model_preset
from hydraulis.base.types import OptimizerLayout
from hydraulis.sharding.ownership import OptimizerOwnership
from hydraulis.sharding.ranges import Region, overlap

TINY = model_preset("tiny")
LAYOUTS = [(1, 1, 1, 1), (4, 1, 1, 4), (2, 1, 2, 4), (1, 4, 1, 4), (1, 2, 2, 4), (3, 1, 1, 3), (2, 1, 1, 4),
           (1, 1, 4, 4), (2, 2, 1, 8)]


def canonical_indices(region: Region) -> np.ndarray:
    """The canonical flat index of each of ``region``'s buffer positions, in buffer order."""
    indices = np.empty(region.size, dtype=np.int64)
    for block in overlap(Region.whole(region.spec), region):
        for i in range(block.count):
            start = block.b + i * block.b_stride - region.offset - region.lo
            indices[start:start + block.length] = block.a + i * block.a_stride + np.arange(block.length)
    return indices


@pytest.mark.parametrize("dp, tp, pp, world", LAYOUTS)
def test_every_element_has_one_owner_and_regions_tile_the_buffers(dp, tp, pp, world):
    placement = OptimizerOwnership(TINY, OptimizerLayout(dp, tp, pp), world)
    seen = {spec.name: np.zeros(spec.numel, dtype=np.int64) for spec in placement.specs}
    for rank in range(world):
        covered = 0
        for region in placement.owned_regions(rank):
            assert region.offset + region.lo == covered
            covered += region.size
            np.add.at(seen[region.spec.name], canonical_indices(region), 1)
            assert (rank, region) in placement.owner_regions(region.spec)
        assert covered == placement.buffer_size(rank)
    assert all((counts == 1).all() for counts in seen.values())
    assert sum(len(placement.owner_regions(spec)) for spec in placement.specs) == \
        sum(len(placement.owned_regions(rank)) for rank in range(world))
    assert sum(placement.buffer_size(r) for r in range(placement.owners)) == TINY.params
    assert all(placement.buffer_size(r) == 0 for r in range(placement.owners, world))


def test_worked_example_of_the_docstring():
    placement = OptimizerOwnership(TINY, OptimizerLayout(2, 1, 2), 4)
    assert [placement.buffer_size(r) for r in range(4)] == [78976, 78976, 79008, 79008]
    assert [region.spec.name for region in placement.owned_regions(0)][:2] == ["embed.weight", "layers.0.attn_norm.weight"]
    assert placement.owned_regions(3)[-1].spec.name == "head.weight"


def test_replicated_kv_heads_and_norms_have_one_owner():
    placement = OptimizerOwnership(TINY, OptimizerLayout(1, 4, 1), 4)
    wk = next(s for s in placement.specs if s.name == "layers.0.attn.wk.weight")
    assert [owner for owner, _ in placement.owner_regions(wk)] == [0, 2]
    norm = next(s for s in placement.specs if s.name == "norm.weight")
    assert [owner for owner, _ in placement.owner_regions(norm)] == [0]


def test_a_layout_that_does_not_divide_the_world_is_an_error():
    with pytest.raises(HydraulisError, match="does not divide"):
        OptimizerOwnership(TINY, OptimizerLayout(3, 1, 1), 4)

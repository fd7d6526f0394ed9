"""The optimizer layout's placement: every element owned once, buffers tiled by their pieces,
``owner_pieces`` and ``owned_pieces`` agree, the docstring's worked example."""

import numpy as np
import pytest

from hydraulis.errors import HydraulisError
from hydraulis.presets import model_preset
from hydraulis.runtime.optimizer.placement import OptimizerPlacement
from hydraulis.runtime.optimizer.ranges import Piece, overlap
from hydraulis.types import OptimizerLayout

TINY = model_preset("tiny")
LAYOUTS = [(1, 1, 1, 1), (4, 1, 1, 4), (2, 1, 2, 4), (1, 4, 1, 4), (1, 2, 2, 4), (3, 1, 1, 3), (2, 1, 1, 4),
           (1, 1, 4, 4), (2, 2, 1, 8)]


def canonical_indices(piece: Piece) -> np.ndarray:
    """The canonical flat index of each of ``piece``'s buffer positions, in buffer order."""
    indices = np.empty(piece.size, dtype=np.int64)
    for block in overlap(Piece.whole(piece.spec), piece):
        for i in range(block.count):
            start = block.b + i * block.b_stride - piece.offset - piece.lo
            indices[start:start + block.length] = block.a + i * block.a_stride + np.arange(block.length)
    return indices


@pytest.mark.parametrize("dp, tp, pp, world", LAYOUTS)
def test_every_element_has_one_owner_and_pieces_tile_the_buffers(dp, tp, pp, world):
    placement = OptimizerPlacement(TINY, OptimizerLayout(dp, tp, pp), world)
    seen = {spec.name: np.zeros(spec.numel, dtype=np.int64) for spec in placement.specs}
    for rank in range(world):
        covered = 0
        for piece in placement.owned_pieces(rank):
            assert piece.offset + piece.lo == covered
            covered += piece.size
            np.add.at(seen[piece.spec.name], canonical_indices(piece), 1)
            assert (rank, piece) in placement.owner_pieces(piece.spec)
        assert covered == placement.buffer_size(rank)
    assert all((counts == 1).all() for counts in seen.values())
    assert sum(len(placement.owner_pieces(spec)) for spec in placement.specs) == \
        sum(len(placement.owned_pieces(rank)) for rank in range(world))
    assert sum(placement.buffer_size(r) for r in range(placement.owners)) == TINY.params
    assert all(placement.buffer_size(r) == 0 for r in range(placement.owners, world))


def test_worked_example_of_the_docstring():
    placement = OptimizerPlacement(TINY, OptimizerLayout(2, 1, 2), 4)
    assert [placement.buffer_size(r) for r in range(4)] == [78976, 78976, 79008, 79008]
    assert [piece.spec.name for piece in placement.owned_pieces(0)][:2] == ["embed.weight", "layers.0.attn_norm.weight"]
    assert placement.owned_pieces(3)[-1].spec.name == "head.weight"


def test_replicated_kv_heads_and_norms_have_one_owner():
    placement = OptimizerPlacement(TINY, OptimizerLayout(1, 4, 1), 4)
    wk = next(s for s in placement.specs if s.name == "layers.0.attn.wk.weight")
    assert [owner for owner, _ in placement.owner_pieces(wk)] == [0, 2]
    norm = next(s for s in placement.specs if s.name == "norm.weight")
    assert [owner for owner, _ in placement.owner_pieces(norm)] == [0]


def test_a_layout_that_does_not_divide_the_world_is_an_error():
    with pytest.raises(HydraulisError, match="does not divide"):
        OptimizerPlacement(TINY, OptimizerLayout(3, 1, 1), 4)

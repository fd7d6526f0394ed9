import numpy as np
import pytest

from hydraulis.base.errors import HydraulisError
from hydraulis.dispatch.batch import prepare_batch
from hydraulis.dispatch.options import DispatchOptions, OversizePolicy


def test_split_worked_example():
    batch = prepare_batch([3, 20], 8, DispatchOptions(oversize=OversizePolicy.SPLIT))
    assert sorted(zip(batch.sequence.tolist(), batch.length.tolist())) == [(0, 3), (1, 4), (1, 8), (1, 8)]
    assert batch.notes and "split 1 sequence" in batch.notes[0]


def test_truncate_keeps_one_piece_per_sequence():
    batch = prepare_batch([3, 20, 9], 8, DispatchOptions(oversize=OversizePolicy.TRUNCATE))
    assert sorted(zip(batch.sequence.tolist(), batch.length.tolist())) == [(0, 3), (1, 8), (2, 8)]


def test_oversize_error_names_sequence_length_and_limit():
    with pytest.raises(HydraulisError, match=r"lengths\[1\]: 20 exceeds .* \(8 tokens\)"):
        prepare_batch([3, 20], 8, DispatchOptions())


def test_alignment_rounds_tokens_and_the_limit():
    batch = prepare_batch([5, 9], 20, DispatchOptions(alignment=8))
    assert batch.tokens.tolist() == [16, 8] and batch.length.tolist() == [9, 5]
    with pytest.raises(HydraulisError, match="after alignment to 8"):
        prepare_batch([17], 20, DispatchOptions(alignment=8))
    with pytest.raises(HydraulisError, match="alignment"):
        prepare_batch([1], 4, DispatchOptions(alignment=8))


def test_split_pieces_respect_alignment():
    batch = prepare_batch([21], 20, DispatchOptions(alignment=8, oversize=OversizePolicy.SPLIT))
    assert sorted(batch.length.tolist()) == [5, 16] and batch.tokens.max() <= 16


@pytest.mark.parametrize("lengths, match", [
    ([], "empty"),
    ([4, 0], r"lengths\[1\]: 0 must be a positive length"),
    ([-3], r"lengths\[0\]: -3 must be a positive length"),
    ([1.5], "must be integers"),
    ([[1, 2]], "flat list"),
])
def test_bad_lengths(lengths, match):
    with pytest.raises(HydraulisError, match=match):
        prepare_batch(lengths, 100, DispatchOptions())


def test_longest_first_with_seeded_ties():
    lengths = [5, 7, 5, 5, 7, 1]
    orders = {tuple(prepare_batch(lengths, 10, DispatchOptions(seed=s)).sequence.tolist()) for s in range(20)}
    for order in orders:
        assert [lengths[i] for i in order] == sorted(lengths, reverse=True)
    assert len(orders) > 1
    assert prepare_batch(lengths, 10, DispatchOptions(seed=3)).sequence.tolist() == \
        prepare_batch(np.array(lengths), 10, DispatchOptions(seed=3)).sequence.tolist()


def test_options_are_validated():
    with pytest.raises(HydraulisError, match="ilp_time_limit_s"):
        DispatchOptions(ilp_time_limit_s=-1)
    with pytest.raises(HydraulisError, match="ilp_nodes: -1 must be between 0 and 10000000"):
        DispatchOptions(ilp_nodes=-1)
    with pytest.raises(HydraulisError, match="ilp_solver"):
        DispatchOptions(ilp_solver="gurobi")
    with pytest.raises(HydraulisError, match="alignment"):
        DispatchOptions(alignment=0)
    with pytest.raises(HydraulisError, match="oversize"):
        DispatchOptions(oversize="split")

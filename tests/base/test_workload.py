import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hydraulis.base.errors import HydraulisError
from hydraulis.base.workload import cut_to_max, fill_to_budget, sample_batches


def test_worked_example():
    pieces = cut_to_max([700, 300, 2500, 100], 1000)
    assert pieces.tolist() == [700, 300, 1000, 1000, 500, 100]
    assert [b.tolist() for b in fill_to_budget(pieces, 1500)] == [[700, 300], [1000], [1000, 500], [100]]


@settings(max_examples=100, deadline=None)
@given(lengths=st.lists(st.integers(1, 5000), min_size=1, max_size=200), cap=st.integers(1, 2000),
       extra=st.integers(0, 3000))
def test_cutting_and_filling_keep_every_token(lengths, cap, extra):
    pieces = cut_to_max(lengths, cap)
    assert pieces.sum() == sum(lengths) and pieces.max() <= cap
    budget = cap + extra
    batches = fill_to_budget(pieces, budget)
    assert np.concatenate(batches).tolist() == pieces.tolist()
    assert all(b.sum() <= budget for b in batches)
    assert all(a.sum() + b[0] > budget for a, b in zip(batches, batches[1:]))


def test_sampled_batches_are_full_and_deterministic():
    lengths = np.arange(1, 5000)
    first = sample_batches(lengths, 50_000, 8, 4096, seed=3)
    again = sample_batches(lengths, 50_000, 8, 4096, seed=3)
    assert len(first) == 8 and all((a == b).all() for a, b in zip(first, again))
    assert all(45_000 < b.sum() <= 50_000 and b.max() <= 4096 for b in first)


@pytest.mark.parametrize("call, needle", [
    (lambda: cut_to_max([5, -1], 10), r"lengths\[1\]: -1 must be a positive length"),
    (lambda: fill_to_budget([5, 20], 10), "token_budget: 10 is smaller than one sequence of 20 tokens"),
    (lambda: sample_batches([5], 100, 0, 50), "steps: 0 must be >= 1"),
    (lambda: sample_batches([5], 100, 1, 500), "token_budget: 100 is smaller than one sequence"),
    (lambda: cut_to_max([1.5], 10), "lengths: 'float64' must be integers"),
])
def test_bad_input_is_named(call, needle):
    with pytest.raises(HydraulisError, match=needle):
        call()

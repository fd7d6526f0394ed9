import pytest
from hypothesis import given
from hypothesis import strategies as st

from hydraulis.base.presets import model_preset
from hydraulis.job.strategy_spec import parse_strategy, scheme_times
from hydraulis.sharding.buckets import bucket_count, bucket_elements, shard_buckets, shard_numel
from hydraulis.sharding.parameters import stage_shards

TINY = model_preset("tiny")


def test_worked_example():
    class Sized:
        def __init__(self, n):
            self.shape = (n,)

    shards = [Sized(300), Sized(500), Sized(200), Sized(700)]
    assert shard_buckets(shards, 900, 400) == (2, 1, 1, 0)


@pytest.mark.parametrize("capacity, first", [(1, 1), (5_000, 1_000), (40_000, 40_000), (10**9, 2**18)])
def test_buckets_are_consecutive_from_the_last_shard_and_within_capacity(capacity, first):
    layout = parse_strategy("1,1,1", TINY, scheme_times(TINY, 1), 64).pipelines[0]
    shards = stage_shards(TINY, layout, 0, 0)
    buckets = shard_buckets(shards, capacity, first)
    assert buckets[-1] == 0
    assert all(a in (b, b + 1) for a, b in zip(buckets, buckets[1:]))
    for k in set(buckets):
        sizes = [shard_numel(s) for s, b in zip(shards, buckets) if b == k]
        assert len(sizes) == 1 or sum(sizes) <= (first if k == 0 else capacity)


def test_bucket_elements_count_the_reduction_dtype():
    assert bucket_elements(25.0, 4) == (25 * 2**18, 2**18)
    assert bucket_elements(25.0, 2) == (25 * 2**19, 2**19)


def test_bucket_count_worked_example():
    assert bucket_count(1_000, 250, 100) == 5
    assert bucket_count(50, 250, 100) == 1


class _Element:
    shape = (1,)


@given(st.integers(1, 3000), st.integers(1, 400), st.integers(1, 400))
def test_the_cost_models_count_is_the_runtimes_cut(elements, capacity, first):
    """One bucket rule: the runtime cutting ``E`` one-element shards makes :func:`bucket_count` buckets."""
    buckets = shard_buckets([_Element()] * elements, capacity, first)
    assert max(buckets) + 1 == bucket_count(elements, capacity, first)

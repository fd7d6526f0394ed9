import numpy as np
import pytest

from hydraulis.base.errors import HydraulisError
from hydraulis.planner.distribution import length_histogram, step_statistics


def test_worked_example_buckets_and_sums():
    stats = step_statistics([np.array([100, 300, 1000]), np.array([129])], bucket_width=128, max_seq_len=1000)
    assert stats.counts.shape == (2, 8)
    assert stats.upper.tolist() == [128, 256, 384, 512, 640, 768, 896, 1000]
    assert np.flatnonzero(stats.counts[0]).tolist() == [0, 2, 7]
    assert stats.maxima.tolist() == [1000, 129]
    assert stats.tokens[0].sum() == 1400 and stats.squares[0].sum() == 1_100_000
    assert np.flatnonzero(stats.counts[1]).tolist() == [1]


def test_workload_is_the_mean_of_the_serving_steps():
    batches = [np.array([10, 20]), np.array([500]), np.array([30, 30, 30])]
    stats = step_statistics(batches, bucket_width=16, max_seq_len=512)
    short = stats.serving(0, 100)
    assert short.tolist() == [0, 2]
    load = stats.workload(short)
    assert load.counts.sum() == pytest.approx(2.5)
    assert load.tokens.sum() == pytest.approx((30 + 90) / 2)
    assert load.maxima.tolist() == [20, 30]
    with pytest.raises(HydraulisError, match="at least one sampled step"):
        stats.workload(stats.serving(100, 200))


def test_histogram_counts_and_quantiles():
    histogram = length_histogram(np.array([1, 128, 129, 1000, 1000]), 128, 1000)
    assert histogram.counts.sum() == 5 and histogram.counts[0] == 2 and histogram.counts[-1] == 2
    assert histogram.quantile(0.4) == 128
    assert histogram.quantile(1.0) == 1000
    with pytest.raises(HydraulisError, match="cut to max_seq_len"):
        length_histogram(np.array([2000]), 128, 1000)

"""Plan quality on the committed example proposals and the long-tailed example workload
(7B original pool, 200K-token steps of at most 32K): the acceptance check of issue 4 on fewer
steps (``benchmarks/dispatch_latency.py`` runs 100)."""

import pytest

from hydraulis.artifacts import read_lengths
from hydraulis.base.types import BatchingMethod
from hydraulis.base.workload import sample_batches
from hydraulis.dispatch import compare_methods
from tests.dispatch.helpers import EXAMPLES, example_proposal


@pytest.mark.parametrize("name", ["7b_32dev", "7b_64dev"])
def test_hydraulis_is_within_15_percent_of_the_bound_and_beats_the_baselines(name):
    prop = example_proposal(name)
    batches = sample_batches(read_lengths(EXAMPLES / "data" / "longtail.txt"), 200_000, 30, 32_768, seed=1)
    summary = {s.method: s for s in compare_methods(prop, batches)}
    assert set(summary) == set(BatchingMethod)
    hydraulis = summary[BatchingMethod.DISPATCH_BALANCED_PACKING]
    assert hydraulis.steps == 30 and sum(hydraulis.chosen) == 30
    assert hydraulis.median_ratio <= 1.15
    assert hydraulis.median_work_ratio >= hydraulis.median_ratio
    assert hydraulis.mean_ms <= summary[BatchingMethod.DISPATCH_FIXED_PACKING].mean_ms
    assert summary[BatchingMethod.DISPATCH_FIXED_PACKING].mean_ms < summary[BatchingMethod.FIXED_PACKING].mean_ms
    assert summary[BatchingMethod.FIXED_PACKING].mean_ms < summary[BatchingMethod.PADDING].mean_ms

"""BalancedBatchSampler and its pure planning: equal micro-batch counts, coverage, determinism, resume."""

import numpy as np
import pytest

from hydraulis.base.types import Scheme, TimeCoefficients
from hydraulis.integrations.rank_batches import rank_micro_batches
from hydraulis.integrations.torch import BalancedBatchSampler
from tests.integrations.helpers import cp_space, long_tailed

TIME = TimeCoefficients(1e-6, 0.05, 30.0)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("ranks", [2, 3, 8])
def test_every_sequence_once_equal_counts_within_the_budget(seed, ranks):
    lengths = long_tailed(ranks * 6, 4_096, seed)
    plan = rank_micro_batches(lengths, ranks, TIME, 4_096)
    flat = sorted(i for rank in plan for mb in rank for i in mb)
    assert flat == list(range(lengths.size))
    assert len({len(rank) for rank in plan}) == 1
    assert all(0 < sum(lengths[i] for i in mb) <= 4_096 for rank in plan for mb in rank)


def test_worked_example_of_the_docstring():
    assert rank_micro_batches([6, 4, 2, 1, 1], 2, TIME, 6) == (((0,), (4,)), ((1, 2), (3,)))


@pytest.mark.parametrize("count", [5, 8])
def test_a_fixed_count_of_micro_batches_on_every_rank(count):
    lengths = long_tailed(24, 4_096, 2)
    plan = rank_micro_batches(lengths, 3, TIME, 4_096, micro_batches=count)
    assert [len(rank) for rank in plan] == [count] * 3
    assert sorted(i for rank in plan for mb in rank for i in mb) == list(range(lengths.size))


def test_balances_time_better_than_equal_counts():
    lengths = np.array([4_000, 100, 3_900] + [100] * 29)
    plan = rank_micro_batches(lengths, 2, TIME, 4_096)
    times = [sum(TIME.c + sum(TIME.a * lengths[i] ** 2 + TIME.b * lengths[i] for i in mb) for mb in rank)
             for rank in plan]
    dealt = [lengths[0::2], lengths[1::2]]
    equal = [TIME.a * (d.astype(float) ** 2).sum() + TIME.b * d.sum() + -(-d.sum() // 4_096) * TIME.c for d in dealt]
    assert max(times) < max(equal)


def _sampler(rank, seed=3):
    return BalancedBatchSampler(long_tailed(97, 2_048, 1), batch_size=16, time=TIME, max_tokens=2_048,
                                num_replicas=2, rank=rank, seed=seed)


def test_ranks_agree_and_cover_each_epoch_and_epochs_differ():
    first, second = _sampler(0), _sampler(1)
    a, b = list(first), list(second)
    assert len(a) == len(b) == len(first)
    seen = sorted(i for mb in a + b for i in mb)
    assert len(seen) == len(set(seen)) == 96
    again = _sampler(0)
    assert list(again) == a
    again.set_epoch(1)
    assert list(again) != a


def test_each_plan_splits_its_global_batch():
    sampler = _sampler(0)
    batches = sampler.global_batches()
    assert len(batches) == 6 and all(len(batch) == 16 for batch in batches)
    for batch, plan in zip(batches, sampler.plans()):
        assert sorted(i for rank in plan for mb in rank for i in mb) == sorted(batch.tolist())


def test_resumes_mid_epoch():
    sampler = _sampler(0)
    iterator = iter(sampler)
    head = [next(iterator) for _ in range(3)]
    state = sampler.state_dict()
    resumed = _sampler(0)
    resumed.load_state_dict(state)
    assert head + list(resumed) == list(_sampler(0))


def test_budget_from_the_space():
    sampler = BalancedBatchSampler.from_space([100] * 8, batch_size=8, space=cp_space(2), scheme=Scheme(1, 8, 1),
                                              num_replicas=2, rank=0)
    assert sampler.max_tokens > 10_000 and sampler.time == cp_space(2).profile(Scheme(1, 8, 1)).time


@pytest.mark.parametrize("build, field", [
    (lambda: rank_micro_batches([5_000], 1, TIME, 4_096), "sequence length"),
    (lambda: rank_micro_batches([], 1, TIME, 4_096), "batch_size"),
    (lambda: rank_micro_batches([10, 10], 3, TIME, 4_096), "batch_size"),
    (lambda: BalancedBatchSampler([10] * 4, batch_size=1, time=TIME, max_tokens=9, num_replicas=2, rank=0),
     "batch_size"),
    (lambda: rank_micro_batches([4_000] * 6, 2, TIME, 4_096, micro_batches=2), "micro_batches"),
    (lambda: rank_micro_batches([10] * 6, 2, TIME, 4_096, micro_batches=4), "batch_size"),
    (lambda: BalancedBatchSampler([10] * 8, batch_size=6, time=TIME, max_tokens=99, num_replicas=2, rank=0,
                                  micro_batches=4), "batch_size"),
])
def test_bad_input_names_field_value_and_limit(build, field):
    with pytest.raises(ValueError) as error:
        build()
    assert str(error.value).startswith(field + ":")

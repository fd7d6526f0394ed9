"""Hybrid context-parallel planning: structure, the cost oracle, bad input."""

import numpy as np
import pytest

from hydraulis.base.errors import HydraulisError
from hydraulis.integrations.cp_contract import check_cp_groups
from hydraulis.integrations.cp_groups import CPGroups, FixedCost, cp_step_ms
from hydraulis.integrations.cp_plan import COUNT_MOVES, _Step, plan_cp_groups
from hydraulis.integrations.cp_ranks import cp_ranks
from tests.integrations.helpers import cp_space, long_tailed


def _check(plan: CPGroups, lengths, ranks):
    table = dict(enumerate(int(s) for s in lengths))
    groups = [[[table[i] for i in rank] for rank in group] for group in plan.groups]
    return check_cp_groups(groups, plan.groups, table, ranks.ranks, ranks)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("size", [8, 16])
def test_plans_meet_the_contract_and_the_cost_is_the_slowest_rank(seed, size):
    ranks = cp_ranks(cp_space(size), 8, size, 16_384)
    lengths = long_tailed(size * 12, 60_000, seed)
    plan = plan_cp_groups(ranks, lengths)
    _check(plan, lengths, ranks)
    slowest = []
    for g, group in enumerate(plan.groups):
        holders = plan.holders(g)
        slowest.append(max(sum(ranks.option(len(holders[i])).ms(int(lengths[i])) for i in rank) for rank in group))
    assert cp_step_ms(plan, lengths, ranks) == pytest.approx(sum(slowest))


@pytest.mark.parametrize("seed", range(6))
def test_a_sample_that_needs_every_rank_runs_in_a_group_of_its_own(seed):
    ranks = cp_ranks(cp_space(8), 8, 8, 8_192)
    lengths = long_tailed(64, 60_000, seed)
    lengths[0] = 65_000
    plan = _check(plan_cp_groups(ranks, lengths), lengths, ranks)
    whole = [g for g in range(len(plan.groups)) if any(len(r) == 8 for r in plan.holders(g).values())]
    assert whole and all(len(plan.holders(g)) < lengths.size / 4 for g in whole)
    assert len(plan.holders(len(plan.groups) - 1)) >= lengths.size / 2


@pytest.mark.parametrize("seed", range(4))
def test_the_step_is_never_below_the_fluid_bound(seed):
    ranks = cp_ranks(cp_space(8), 8, 8, 8_192)
    lengths = np.minimum(np.random.default_rng(seed).lognormal(7.5, 1.2, 64).astype(np.int64) + 1, 65_536)
    need = [next(o for o in ranks.options if o.capacity >= s) for s in lengths]
    bound = sum(o.cp * o.ms(int(s)) for o, s in zip(need, lengths)) / ranks.ranks
    plan = _check(plan_cp_groups(ranks, lengths), lengths, ranks)
    assert bound <= cp_step_ms(plan, lengths, ranks) <= 1.25 * bound


def test_cost_of_a_hand_made_plan():
    ranks = cp_ranks(cp_space(4), 8, 4, 16_384)
    lengths = [4_000, 8_000, 1_000, 2_000]
    plan = CPGroups((((0,), (1,), (1,), (2, 3)), ((3,), (3,), (2,), (0,))))
    one, two = ranks.option(1), ranks.option(2)
    first = max(one.ms(4_000), two.ms(8_000), one.ms(1_000) + one.ms(2_000))
    second = max(two.ms(2_000), one.ms(1_000), one.ms(4_000))
    assert cp_step_ms(plan, lengths, ranks) == pytest.approx(first + second)
    grouped = max(one.ms(4_000), two.ms(8_000), one.time.c + one.ms(1_000) + one.ms(2_000) - 2 * one.time.c)
    assert cp_step_ms(CPGroups(plan.groups[:1]), lengths, ranks, FixedCost.GROUP) == pytest.approx(grouped)


def test_one_long_sample_goes_to_a_block_that_holds_it():
    ranks = cp_ranks(cp_space(8), 8, 8, 4_096)
    lengths = np.array([30_000] + [500] * 40)
    plan = _check(plan_cp_groups(ranks, lengths), lengths, ranks)
    k = len(plan.holders(0)[0])
    assert ranks.option(k).capacity >= 30_000 and k >= 8


def test_the_contract_rejects_unaligned_blocks():
    with pytest.raises(HydraulisError, match="consecutive ranks starting at a multiple of 2"):
        check_cp_groups([[[7], [3], [7], [4]]], [[[0], [1], [0], [2]]], {0: 7, 1: 3, 2: 4}, 4)


@pytest.mark.parametrize("build, field", [
    (lambda: plan_cp_groups(cp_ranks(cp_space(8), 8, 8, 4_096), [10**6]), "sample length"),
    (lambda: plan_cp_groups(cp_ranks(cp_space(8), 8, 8, 4_096), []), "sample_id_seqlens"),
    (lambda: cp_ranks(cp_space(8), 4, 8, 4_096), "tp"),
    (lambda: cp_ranks(cp_space(6, cps=(4, 8)), 8, 6, 4_096), "dp_cp_group.size()"),
    (lambda: plan_cp_groups(cp_ranks(cp_space(64, cps=(1, 2)), 8, 64, 4_096), [100] * 5), "sample_id_seqlens"),
])
def test_bad_input_names_field_value_and_limit(build, field):
    with pytest.raises(ValueError) as error:
        build()
    assert str(error.value).startswith(field + ":")


def test_a_mixed_group_widens_no_block_past_where_the_longest_sample_meets_the_mean_load():
    ranks = cp_ranks(cp_space(64, cps=(1, 2, 4, 8, 16, 32, 64)), 8, 64, 4_096)
    lengths = long_tailed(64 * 12, 30_000, seed=3)
    longest = int(lengths.max())
    level = sum(ranks.option(k).cp * ranks.option(k).ms(int(s)) for s in lengths
                for k in [next(o.cp for o in ranks.options if o.capacity >= s)]) / ranks.ranks
    widest = next(o for o in ranks.options if o.capacity >= longest and o.ms(longest) <= level)
    assert widest.cp < ranks.options[-1].cp
    plan = _check(plan_cp_groups(ranks, lengths), lengths, ranks)
    assert max(len(r) for g in range(len(plan.groups)) for r in plan.holders(g).values()) <= widest.cp


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("size, per_rank", [(8, 8_192), (64, 4_096)])
def test_the_layered_groups_place_every_sample_once_and_the_plan_takes_the_cheaper(seed, size, per_rank):
    ranks = cp_ranks(cp_space(size), 8, size, per_rank)
    lengths = long_tailed(size * 8, 60_000, seed)
    step = _Step.of(ranks, lengths)
    layered = step.layers(COUNT_MOVES)
    plan = _check(CPGroups(tuple(g.ranks() for g in layered)), lengths, ranks)
    assert sorted(i for g in range(len(plan.groups)) for i in plan.holders(g)) == list(range(lengths.size))
    for group in layered[:-1]:
        first = min((i for _, samples in group.blocks for i in samples),
                    key=lambda i: (-step.need[i], -step.ms[step.need[i], i]))
        assert group.ms == step.ms[step.need[first], first]
    assert cp_step_ms(plan_cp_groups(ranks, lengths), lengths, ranks) <= cp_step_ms(plan, lengths, ranks)


def test_the_worked_example_of_the_docs():
    ranks = cp_ranks(cp_space(8, device="h100-80g", cps=(1, 2, 4, 8)), 8, 8, 8_192)
    lengths = [60_000, 30_000, 12_000, 10_000] + [3_000] * 20
    plan = _check(plan_cp_groups(ranks, lengths), lengths, ranks)
    assert [round(t, 1) for t in _group_times(plan, lengths, ranks)] == [475.4, 282.6, 121.8]


def _group_times(plan, lengths, ranks):
    return [cp_step_ms(CPGroups((group,)), lengths, ranks) for group in plan.groups]

from dataclasses import replace

import numpy as np
import pytest

from hydraulis.base.errors import HydraulisError
from hydraulis.base.types import BatchingMethod
from hydraulis.cost import simulate_1f1b
from hydraulis.dispatch import DispatchOptions, OversizePolicy, PackingStatus, dispatch, strategy_bound
from hydraulis.dispatch.estimate import estimate_ms
from hydraulis.dispatch.packing import first_fit_decreasing, organ_order
from hydraulis.dispatch.pipelines import PipelineTable
from tests.dispatch.helpers import group, proposal

FAST = group(pp=1, count=2, capacity=1000, a=0.0, b=1.0, c=0.0)


def test_unknown_method():
    with pytest.raises(HydraulisError, match="method: 'greedy' must be one of"):
        dispatch(proposal((FAST,)), [10], "greedy")


def test_methods_by_name_or_enum():
    prop = proposal((FAST,))
    by_name = dispatch(prop, [10, 20], "padding")
    assert by_name.method is BatchingMethod.PADDING
    assert replace(dispatch(prop, [10, 20], BatchingMethod.PADDING), planning_ms=0) == replace(by_name, planning_ms=0)


def test_proposal_that_fails_validation():
    prop = proposal((FAST,))
    too_big = replace(prop, devices=1, optimizer_layout=replace(prop.optimizer_layout, dp=1))
    with pytest.raises(HydraulisError, match=r"strategies\[0\].devices: 2 exceeds the proposal's 1 devices"):
        dispatch(too_big, [10])
    bad_scheme = proposal((group(pp=1, count=1, capacity=100, a=0.0, b=1.0, c=0.0, tp=3),))
    with pytest.raises(HydraulisError, match=r"pipelines\[0\].scheme.tp: 3 does not divide"):
        dispatch(bad_scheme, [10])
    idle = proposal((group(pp=1, count=1, capacity=100, a=0.0, b=0.0, c=1.0),))
    with pytest.raises(HydraulisError, match="must not both be 0"):
        dispatch(idle, [10])
    with pytest.raises(HydraulisError, match="must be a Proposal"):
        dispatch({"strategies": []}, [10])


def test_empty_and_bad_batches():
    prop = proposal((FAST,))
    with pytest.raises(HydraulisError, match="empty"):
        dispatch(prop, [])
    with pytest.raises(HydraulisError, match=r"lengths\[2\]: -1"):
        dispatch(prop, [3, 4, -1])


def test_oversize_policies_through_dispatch():
    prop = proposal((FAST,))
    with pytest.raises(HydraulisError, match=r"lengths\[1\]: 2500 exceeds .* \(1000 tokens\)"):
        dispatch(prop, [10, 2500])
    split = dispatch(prop, [10, 2500], options=DispatchOptions(oversize=OversizePolicy.SPLIT))
    pieces = sorted(n for p in split.pipelines for mb in p.micro_batches for s, n in zip(mb.sequences, mb.lengths)
                    if s == 1)
    assert pieces == [500, 1000, 1000] and any("split" in n for n in split.notes)
    truncated = dispatch(prop, [10, 2500], options=DispatchOptions(oversize=OversizePolicy.TRUNCATE))
    assert sorted(mb.tokens for p in truncated.pipelines for mb in p.micro_batches) == [10, 1000]


def test_balanced_dispatch_balances_time_not_tokens():
    """Two equal pipelines, lengths whose time is quadratic: the long one alone, the short ones together."""
    quadratic = group(pp=1, count=2, capacity=10_000, a=1e-3, b=0.0, c=0.0)
    plan = dispatch(proposal((quadratic,)), [2000, 1000, 1000, 1000, 1000])
    held = sorted(sorted(s for mb in p.micro_batches for s in mb.sequences) for p in plan.pipelines)
    assert held == [[0], [1, 2, 3, 4]]
    assert plan.predicted_ms == pytest.approx(4000.0)


def test_a_long_sequence_goes_to_the_only_pipeline_that_holds_it():
    small = group(pp=1, count=3, capacity=100, a=0.0, b=1.0, c=0.0)
    large = group(pp=1, count=1, capacity=1000, a=0.0, b=2.0, c=0.0, tp=2)
    plan = dispatch(proposal((small, large)), [900, 90, 90, 90, 30, 30, 30])
    assert [s for mb in plan.pipelines[3].micro_batches for s in mb.sequences] == [0]
    assert all(mb.tokens <= 100 for p in plan.pipelines[:3] for mb in p.micro_batches)


def test_the_cheaper_strategy_wins_and_reduction_counts():
    one = (group(pp=1, count=1, capacity=1000, a=0.0, b=1.0, c=0.0),)
    two = (group(pp=1, count=2, capacity=1000, a=0.0, b=1.0, c=0.0),)
    plan = dispatch(proposal(one, two, reduce_ms=(0.0, 5.0)), [100, 100])
    assert plan.strategy_index == 1 and plan.predicted_ms == pytest.approx(105.0)
    plan = dispatch(proposal(one, two, reduce_ms=(0.0, 150.0)), [100, 100])
    assert plan.strategy_index == 0 and plan.predicted_ms == pytest.approx(200.0)


def test_strategies_that_cannot_hold_the_batch_are_skipped_with_a_note():
    short = (group(pp=1, count=4, capacity=100, a=0.0, b=1.0, c=0.0),)
    long = (group(pp=1, count=1, capacity=1000, a=0.0, b=1.0, c=0.0),)
    plan = dispatch(proposal(short, long), [500, 10])
    assert plan.strategy_index == 1
    assert any("strategy 0 skipped" in note for note in plan.notes)


def test_padding_worked_example():
    prop = proposal((group(pp=1, count=1, capacity=2000, a=0.0, b=1.0, c=7.0),))
    plan = dispatch(prop, [1000, 200, 300], BatchingMethod.PADDING)
    assert [mb.sequences for mb in plan.pipelines[0].micro_batches] == [(0, 1), (2,)]
    assert plan.pipelines[0].predicted_ms == pytest.approx((7 + 2000) + (7 + 1000))


def test_fixed_packing_deals_round_robin_to_the_context_length():
    prop = replace(proposal((group(pp=1, count=2, capacity=5000, a=0.0, b=1.0, c=0.0),)), max_seq_len=100)
    plan = dispatch(prop, [60, 50, 40, 30, 20], BatchingMethod.FIXED_PACKING)
    micro = [[mb.sequences for mb in p.micro_batches] for p in plan.pipelines]
    assert micro == [[(0, 2)], [(1, 3, 4)]]


def test_no_node_budget_says_so_and_a_budget_runs_the_solver_the_same_way_every_time():
    prop = proposal((group(pp=2, count=1, capacity=4000, a=1e-4, b=0.1, c=3.0),))
    lengths = [900, 700, 500, 400, 300, 200, 100]
    greedy = dispatch(prop, lengths)
    assert any("ilp_nodes 0" in note for note in greedy.notes) and greedy.pipelines[0].solver_status == "greedy"
    options = DispatchOptions(ilp_nodes=3)
    solved = dispatch(prop, lengths, options=options)
    assert solved.pipelines[0].solver_status.startswith(("ilp_", "greedy_ilp_"))
    assert solved.pipelines[0].solver_status != PackingStatus.ILP_TIME_LIMIT.value
    assert solved.predicted_ms <= greedy.predicted_ms
    assert any(note.startswith("ilp for pipeline 0: ") for note in solved.notes)
    again = dispatch(prop, lengths, options=options)
    assert (again.pipelines, again.notes) == (solved.pipelines, solved.notes)


def test_a_safety_stop_that_fires_is_reported():
    """No time left at all: the program is not even started, and the notes say why."""
    prop = proposal((group(pp=2, count=1, capacity=4000, a=1e-4, b=0.1, c=3.0),))
    plan = dispatch(prop, [900, 700, 500, 400], options=DispatchOptions(ilp_nodes=10, ilp_time_limit_s=0.0))
    assert any("safety time limit is used up" in note for note in plan.notes)
    assert plan.pipelines[0].solver_status == "greedy"


def test_ilp_skips_pipelines_with_too_many_sequences():
    prop = proposal((group(pp=2, count=1, capacity=4000, a=1e-4, b=0.1, c=3.0),))
    plan = dispatch(prop, list(range(10, 40)), options=DispatchOptions(ilp_nodes=10, ilp_max_sequences=5))
    assert any("ilp_max_sequences" in note for note in plan.notes) and plan.pipelines[0].solver_status == "greedy"


def test_idle_pipelines_get_an_empty_plan():
    plan = dispatch(proposal((group(pp=1, count=3, capacity=1000, a=0.0, b=1.0, c=0.0),)), [10])
    assert sorted(len(p.micro_batches) for p in plan.pipelines) == [0, 0, 1]
    assert {p.solver_status for p in plan.pipelines if not p.micro_batches} == {"idle"}


def test_first_fit_decreasing_and_organ_order_worked_examples():
    assert first_fit_decreasing(np.array([6, 5, 4, 3, 2]), 10) == [[0, 2], [1, 3, 4]]
    assert first_fit_decreasing(np.array([12, 3]), 10) == [[0], [1]]
    times = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    assert times[organ_order(times)].tolist() == [2.0, 4.0, 5.0, 3.0, 1.0]


def test_estimate_worked_example():
    """p = 2, c = 15, W = 600, many small pieces: v* ≈ 5.5, T ≈ 779 ms (module docstring)."""
    estimate, v = estimate_ms(600.0, 1000, 1.0, 100, 15.0, 2, 100_000, 0.75, 0.0)
    assert v == pytest.approx(np.sqrt(0.75 * 600 / 15))
    assert estimate == pytest.approx(600 + 2 * np.sqrt(0.75 * 600 * 15) + 15, rel=1e-9)
    assert estimate == pytest.approx(779.3, abs=0.1)
    assert estimate_ms(600.0, 2500, 50.0, 10, 15.0, 1, 1000, 0.75, 0.0) == pytest.approx((600 + 3 * 15, 3))
    assert estimate_ms(0.0, 0, 0.0, 0, 15.0, 2, 1000, 0.75, 0.0) == (0.0, 0)


def test_bound_worked_examples():
    """Balance: two pieces costing 10 on A and 20 on B (one pipeline each) → 13.3; crossing:
    a 32,768-token piece on the 7B pool's (1,16,1) crosses in 1347 ms."""
    a = group(pp=1, count=1, capacity=100, a=0.0, b=1.0, c=0.0)
    b = group(pp=1, count=1, capacity=100, a=0.0, b=2.0, c=0.0)
    table = PipelineTable.of(proposal((a, b)).strategies[0].strategy, proposal((a,)).pipeline_model)
    tokens = np.array([10, 10])
    assert strategy_bound(table, tokens, table.work(tokens)) == pytest.approx(40 / 3, rel=1e-9)
    wide = group(pp=1, count=1, capacity=140_723, a=3.01808129e-07, b=0.0292311085, c=65.23634593993279, tp=16)
    table = PipelineTable.of(proposal((wide,)).strategies[0].strategy, proposal((wide,)).pipeline_model)
    tokens = np.array([32_768])
    assert strategy_bound(table, tokens, table.work(tokens)) == pytest.approx(1347.1, abs=0.1)


def test_ramped_micro_batches_shorten_1f1b_worked_example():
    assert simulate_1f1b([10.0] * 6, 2).makespan_ms == pytest.approx(70.0)
    assert simulate_1f1b([2.0, 5, 8, 10, 10, 10, 8, 5, 2], 2).makespan_ms == pytest.approx(64.667, abs=1e-3)


def test_balanced_packing_splits_a_two_stage_pipeline_into_more_micro_batches_than_fixed_packing():
    """One (1,1,2) pipeline holding everything in one micro-batch would idle a stage for half
    the step; balanced packing cuts the work into ramped micro-batches and is strictly faster."""
    prop = proposal((group(pp=2, count=1, capacity=100_000, a=0.0, b=0.1, c=5.0),))
    lengths = [500] * 40
    fixed = dispatch(prop, lengths, BatchingMethod.DISPATCH_FIXED_PACKING)
    balanced = dispatch(prop, lengths)
    assert len(fixed.pipelines[0].micro_batches) == 1 and fixed.predicted_ms == pytest.approx(2 * (5 + 2000))
    assert len(balanced.pipelines[0].micro_batches) > 4
    assert balanced.predicted_ms < 0.65 * fixed.predicted_ms

import pytest

from hydraulis.base.errors import HydraulisError
from hydraulis.fused import FuseOptions, StopReason, check_schedule, fuse, scheduled_tasks, simulate, task_graph
from hydraulis.fused.baselines import greedy_order, interleaved_order, sequential_order
from tests.fused.helpers import assert_valid, two_models

BUDGET = FuseOptions(time_limit_s=600.0, evaluations=30_000, seed=3)


def test_memory_capped_greedy_honours_the_cap():
    problem = two_models(8, 4, 6)
    graph = task_graph(problem)
    uncapped = simulate(graph, greedy_order(problem, graph))
    capped = greedy_order(problem, graph, uncapped.peak_memory - 1.0)
    assert assert_valid(problem, capped, uncapped.peak_memory - 1.0).peak_memory < uncapped.peak_memory


@pytest.mark.parametrize("make", [sequential_order, greedy_order, interleaved_order])
def test_baselines_are_valid(make):
    problem = two_models(8, 4, 5)
    assert_valid(problem, make(problem, task_graph(problem)))


def test_search_reaches_the_bound_and_beats_the_baselines():
    result = fuse(two_models(8, 4, 6), BUDGET)
    assert check_schedule(result.problem, scheduled_tasks(result.graph, result.schedule)) == []
    assert result.schedule.makespan_ms == pytest.approx(result.bound.value_ms)
    assert result.stop is StopReason.LOWER_BOUND
    assert result.schedule.makespan_ms < min(result.greedy.makespan_ms, result.sequential.makespan_ms)


def test_search_is_deterministic_for_a_seed():
    problem = two_models(6, 6, 5, 1.5)
    first, second = fuse(problem, BUDGET), fuse(problem, BUDGET)
    assert (first.schedule.order == second.schedule.order).all()


def test_memory_limit_is_hard():
    problem = two_models(8, 4, 6)
    limit = 4.0
    result = fuse(problem, FuseOptions(time_limit_s=600.0, evaluations=20_000, memory_limit=limit))
    assert result.schedule.peak_memory <= limit
    assert check_schedule(problem, scheduled_tasks(result.graph, result.schedule), memory_limit=limit) == []
    assert result.schedule.makespan_ms >= result.bound.value_ms


def test_memory_limit_below_one_micro_batch_is_refused():
    with pytest.raises(HydraulisError, match="memory_limit"):
        fuse(two_models(4, 2, 2), FuseOptions(memory_limit=1.0))


def test_memory_phase_never_lengthens_the_makespan():
    problem = two_models(8, 8, 8, 1.0)
    result = fuse(problem, FuseOptions(time_limit_s=600.0, evaluations=20_000))
    assert simulate(result.graph, result.schedule.order).makespan_ms == result.schedule.makespan_ms
    assert result.schedule.makespan_ms <= min(result.greedy.makespan_ms, result.interleaved.makespan_ms)

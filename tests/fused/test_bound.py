import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hydraulis.fused import FusedProblem, fused_model, lower_bound, simulate, task_graph
from hydraulis.fused.baselines import sequential_order
from hydraulis.fused.exact import optimal_makespan
from tests.fused.helpers import problems, random_order, two_models


@settings(max_examples=60, deadline=None)
@given(problems(), st.integers(0, 2**16))
def test_no_valid_schedule_beats_the_bound(problem, seed):
    graph = task_graph(problem)
    bound = lower_bound(problem, graph)
    assert simulate(graph, random_order(problem, seed)).makespan_ms >= bound.value_ms - 1e-9
    assert bound.value_ms >= max(bound.work_ms, bound.chain_ms) - 1e-9


@settings(max_examples=30, deadline=None)
@given(problems(max_devices=2, max_micro_batches=2))
def test_bound_never_exceeds_the_brute_force_optimum(problem):
    graph = task_graph(problem)
    if graph.size > 24:
        return
    assert lower_bound(problem, graph).value_ms <= optimal_makespan(graph) + 1e-9


def test_one_pipeline_bound_is_1f1b_makespan():
    problem = FusedProblem(4, (fused_model("a", 4, 1, "forward", 5, 1.0),))
    graph = task_graph(problem)
    assert lower_bound(problem, graph).value_ms == (5 + 4 - 1) * 3.0
    assert simulate(graph, sequential_order(problem, graph)).makespan_ms == (5 + 4 - 1) * 3.0


TIGHT = [two_models(2, 1, 1, 1.0), two_models(2, 2, 1, 2.0), two_models(2, 1, 2, 1.0), two_models(2, 2, 2, 2.0),
         two_models(2, 2, 3, 1.0), two_models(3, 1, 1, 2.0), two_models(3, 1, 2, 1.0), two_models(3, 1, 3, 1.0)]


@pytest.mark.parametrize("problem", TIGHT, ids=range(len(TIGHT)))
def test_bound_is_tight_on_tiny_uniform_instances(problem):
    """Brute force over every active schedule: the optimum equals the bound."""
    graph = task_graph(problem)
    assert optimal_makespan(graph) == pytest.approx(lower_bound(problem, graph).value_ms)


def test_bound_can_be_loose_where_three_stages_interlock():
    """N = 3, both models three stages, one micro-batch each: optimum 9⅓ ms, bound 9 ms (3.7 %)."""
    graph = task_graph(two_models(3, 3, 1, 1.5))
    assert lower_bound(two_models(3, 3, 1, 1.5), graph).value_ms == pytest.approx(9.0)
    assert optimal_makespan(graph) == pytest.approx(28 / 3)

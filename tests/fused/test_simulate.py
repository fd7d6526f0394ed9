import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hydraulis.fused import FusedProblem, anneal, fused_model, simulate, task_graph
from hydraulis.fused.tasks import TaskGraph
from tests.fused.helpers import assert_valid, problems, random_order


def test_worked_example_one_micro_batch_two_stages():
    problem = FusedProblem(2, (fused_model("a", 2, 1, "forward", 1, 1.0),))
    graph = task_graph(problem)
    timeline = simulate(graph, graph.device_tasks)
    assert timeline.makespan_ms == 6.0
    assert timeline.start.tolist() == [0.0, 1.0, 2.0, 4.0]


def test_backward_before_its_forward_is_invalid():
    problem = FusedProblem(1, (fused_model("a", 1, 1, "forward", 2, 1.0),))
    graph = task_graph(problem)
    assert simulate(graph, np.array([1, 0, 2, 3])) is None
    assert simulate(graph, np.array([0, 2, 1, 3])).makespan_ms == 6.0


def _reference(graph: TaskGraph, order: np.ndarray) -> np.ndarray | None:
    """Plain fixed-point iteration of start = max(chain end, device end)."""
    start = np.zeros(graph.size)
    device_prev = np.full(graph.size, -1)
    for d in range(graph.devices):
        tasks = graph.device_order(order, d)
        device_prev[tasks[1:]] = tasks[:-1]
    for _ in range(graph.size + 1):
        end = start + graph.duration
        new = np.maximum(np.where(graph.chain_prev >= 0, end[graph.chain_prev], 0.0),
                         np.where(device_prev >= 0, end[device_prev], 0.0))
        if np.array_equal(new, start):
            return start
        start = new
    return None


@settings(max_examples=40, deadline=None)
@given(problems(), st.integers(0, 2**16))
def test_simulation_matches_fixed_point_and_checker(problem, seed):
    order = random_order(problem, seed)
    timeline = assert_valid(problem, order)
    assert np.allclose(timeline.start, _reference(task_graph(problem), order))


@settings(max_examples=25, deadline=None)
@given(problems(max_devices=4, max_micro_batches=3), st.integers(0, 2**16))
def test_incremental_annealing_state_matches_full_simulation(problem, seed):
    graph = task_graph(problem)
    timeline = simulate(graph, random_order(problem, seed))
    order, start, end, peaks = timeline.order.copy(), timeline.start.copy(), timeline.end.copy(), timeline.device_peaks.copy()
    best = order.copy()
    state = np.array([timeline.makespan_ms, timeline.peak_memory, timeline.memory_sum])
    anneal.seed(seed)
    anneal.anneal_epoch(order, graph.positions(order), start, end, peaks, graph.device_start, graph.device,
                        graph.duration, graph.chain_prev, graph.chain_next, graph.forward, graph.memory, 200, 1.0, 0.1,
                        4, 0.5, 0.1, np.inf, anneal.MAKESPAN, np.inf, 0.0, best, state)
    after = simulate(graph, order)
    assert after is not None and np.allclose(after.start, start) and np.allclose(after.device_peaks, peaks)
    assert simulate(graph, best).makespan_ms == state[0] <= timeline.makespan_ms

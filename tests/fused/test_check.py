from dataclasses import replace

import pytest

from hydraulis.fused import Phase, check_schedule, scheduled_tasks, simulate, task_graph
from hydraulis.fused.baselines import sequential_order
from tests.fused.helpers import two_models

PROBLEM = two_models(4, 2, 3)


def _tasks():
    graph = task_graph(PROBLEM)
    return list(scheduled_tasks(graph, simulate(graph, sequential_order(PROBLEM, graph))))


def test_valid_schedule_passes():
    assert check_schedule(PROBLEM, _tasks()) == []


def _shift_first_backward(tasks):
    i = next(i for i, t in enumerate(tasks) if t.phase is Phase.BACKWARD and t.stage == PROBLEM.models[0].stages - 1)
    tasks[i] = replace(tasks[i], start_ms=0.0, end_ms=tasks[i].end_ms - tasks[i].start_ms)


def _wrong_device(tasks):
    tasks[0] = replace(tasks[0], device=(tasks[0].device + 1) % PROBLEM.devices)


def _stretch(tasks):
    tasks[3] = replace(tasks[3], end_ms=tasks[3].end_ms + 0.5)


def _overlap(tasks):
    a, b = tasks[0], tasks[1]
    tasks[1] = replace(b, start_ms=a.start_ms, end_ms=a.start_ms + (b.end_ms - b.start_ms))


@pytest.mark.parametrize("corrupt, words", [
    (lambda tasks: tasks.pop(), "missing"),
    (lambda tasks: tasks.append(tasks[0]), "twice"),
    (_shift_first_backward, "before"),
    (_wrong_device, "placement"),
    (_stretch, "lasts"),
    (_overlap, "at once"),
    (lambda tasks: tasks.append(replace(tasks[0], micro_batch=99)), "not a task"),
])
def test_checker_rejects_corrupted_schedules(corrupt, words):
    tasks = _tasks()
    corrupt(tasks)
    found = check_schedule(PROBLEM, tasks)
    assert found and any(words in line for line in found)


def test_checker_enforces_the_memory_limit():
    tasks = _tasks()
    assert check_schedule(PROBLEM, tasks, memory_limit=100.0) == []
    assert "exceeds the limit" in check_schedule(PROBLEM, tasks, memory_limit=2.5)[0]

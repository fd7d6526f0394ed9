"""Baseline schedules and the list scheduler that builds them.

* **sequential** — per device, model 0's tasks in 1F1B order, then model 1's (and so on). A
  device starts the next model as soon as it has finished the previous one, so the models
  overlap only where their pipelines' ramps do.
* **greedy** — list scheduling: an idle device runs the next task of model 0's 1F1B order when
  it is ready, otherwise the next ready task of model 1's (the second model fills the first's
  bubbles), and so on down the models.
* **interleaved** — list scheduling that alternates: an idle device runs the next 1F1B task of
  the model it did not run last when that is ready, otherwise whichever is ready.

A model's tasks on a device are sorted by their position in the one 1F1B order of their stage
(:func:`hydraulis.cost.order.one_f_one_b_position`), the order the runtime executes.

The list scheduler is non-delay with respect to what its rule allows: whenever a device is
idle it starts the task its rule picks among the tasks whose chain predecessor has ended. It
never deadlocks with the queue rules here (each model's own 1F1B queues always have a ready
head), and it returns the per-device orders, which :mod:`hydraulis.fused.simulate` replays
exactly.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable

import numpy as np

from hydraulis.cost.order import one_f_one_b_position
from hydraulis.fused.problem import FusedProblem
from hydraulis.fused.tasks import TaskGraph

Choose = Callable[[int, list[int], float], int | None]
"""A list-scheduling rule: given an idle device, its ready tasks and the time, the task to
start (or ``None`` to wait)."""


def one_f_one_b_keys(problem: FusedProblem, graph: TaskGraph) -> np.ndarray:
    """Each task's position in its model's 1F1B order on its device (see the module docstring)."""
    stages = np.array([m.stages for m in problem.models])[graph.model]
    counts = np.array([m.micro_batches[r] for m in problem.models for r in range(m.replicas)])
    first = np.cumsum([0] + [m.replicas for m in problem.models])[:-1]
    m = counts[first[graph.model] + graph.replica]
    return one_f_one_b_position(graph.stage, stages, m, graph.micro_batch, graph.forward)


def sequential_order(problem: FusedProblem, graph: TaskGraph) -> np.ndarray:
    """Per device: model 0 in 1F1B order, then model 1, …"""
    keys = one_f_one_b_keys(problem, graph)
    return _order_by(graph, graph.model * (keys.max() + 1) + keys)


def greedy_order(problem: FusedProblem, graph: TaskGraph, memory_limit: float = float("inf")) -> np.ndarray | None:
    """Model 0 first in 1F1B order; later models fill its bubbles (module docstring). Under a
    ``memory_limit`` a forward that would not fit waits (``None`` if that stalls)."""
    queues = _queues(problem, graph)

    def choose(device: int, ready: list[int], now: float) -> int | None:
        heads = [q[device][0] for q in queues if q[device] and q[device][0] in ready]
        return heads[0] if heads else None

    order = list_schedule(graph, capped(graph, _popping(choose, queues), memory_limit))
    return _never_stalls(order) if memory_limit == float("inf") else order


def interleaved_order(problem: FusedProblem, graph: TaskGraph,
                      memory_limit: float = float("inf")) -> np.ndarray | None:
    """Alternate between the models' 1F1B queues on every device (module docstring); a
    ``memory_limit`` as in :func:`greedy_order`."""
    queues = _queues(problem, graph)
    last = [-1] * graph.devices

    def choose(device: int, ready: list[int], now: float) -> int | None:
        heads = [(k == last[device], k, q[device][0]) for k, q in enumerate(queues)
                 if q[device] and q[device][0] in ready]
        if not heads:
            return None
        _, k, task = min(heads)
        last[device] = k
        return task

    order = list_schedule(graph, capped(graph, _popping(choose, queues), memory_limit))
    return _never_stalls(order) if memory_limit == float("inf") else order


def list_schedule(graph: TaskGraph, choose: Choose) -> np.ndarray | None:
    """Run the list scheduler with rule ``choose``; returns the per-device orders, or ``None``
    when the rule waited with nothing running (a memory cap can do that)."""
    ready: list[list[int]] = [[] for _ in range(graph.devices)]
    for t in np.flatnonzero(graph.chain_prev < 0):
        ready[graph.device[t]].append(int(t))
    idle = [True] * graph.devices
    events: list[tuple[float, int]] = []
    orders: list[list[int]] = [[] for _ in range(graph.devices)]
    now = 0.0
    while True:
        for d in range(graph.devices):
            if idle[d] and ready[d]:
                task = choose(d, ready[d], now)
                if task is not None:
                    ready[d].remove(task)
                    orders[d].append(task)
                    idle[d] = False
                    heapq.heappush(events, (now + float(graph.duration[task]), task))
        if not events:
            break
        now, task = heapq.heappop(events)
        idle[graph.device[task]] = True
        successor = int(graph.chain_next[task])
        if successor >= 0:
            ready[graph.device[successor]].append(successor)
    order = np.fromiter((t for d in orders for t in d), dtype=np.int64)
    return order if order.size == graph.size else None


def capped(graph: TaskGraph, choose: Choose, memory_limit: float) -> Choose:
    """``choose`` restricted to tasks that keep the device within ``memory_limit``: a forward
    adds its micro-batch's memory, a backward frees it (the device is busy until it ends)."""
    held = np.zeros(graph.devices)

    def pick(device: int, ready: list[int], now: float) -> int | None:
        allowed = [t for t in ready if not graph.forward[t] or held[device] + graph.memory[t] <= memory_limit]
        task = choose(device, allowed, now) if allowed else None
        if task is not None:
            held[device] += graph.memory[task] if graph.forward[task] else -graph.memory[task]
        return task

    return pick


def _queues(problem: FusedProblem, graph: TaskGraph) -> list[list[deque[int]]]:
    """``queues[k][d]``: model ``k``'s tasks on device ``d`` in 1F1B order (consumed from the front)."""
    keys = one_f_one_b_keys(problem, graph)
    queues = [[deque() for _ in range(graph.devices)] for _ in problem.models]
    for t in np.lexsort((keys, graph.model, graph.device)):
        queues[graph.model[t]][graph.device[t]].append(int(t))
    return queues


def _popping(choose: Choose, queues: list[list[deque[int]]]) -> Choose:
    def pick(device: int, ready: list[int], now: float) -> int | None:
        task = choose(device, ready, now)
        if task is not None:
            for per_model in queues:
                if per_model[device] and per_model[device][0] == task:
                    per_model[device].popleft()
        return task

    return pick


def _never_stalls(order: np.ndarray | None) -> np.ndarray:
    if order is None:
        raise RuntimeError("a 1F1B queue rule stalled, which its proof excludes")
    return order


def _order_by(graph: TaskGraph, key: np.ndarray) -> np.ndarray:
    return np.lexsort((key, graph.device)).astype(np.int64)

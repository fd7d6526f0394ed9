"""Exact simulation of a fused schedule: per-device task orders → start and end times.

A task starts when its chain predecessor has ended and the task before it on its device has
ended (a *semi-active* schedule: nothing waits longer than it must):

    start(t) = max(end(chain_prev(t)), end(device_prev(t)))        end(t) = start(t) + p(t)

The orders are *invalid* when these equations have no solution: a cycle through chain and
device edges (a deadlock, e.g. a backward ordered before its own forward on a device).

The details: :class:`Simulator`."""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from hydraulis.base.errors import require
from hydraulis.fused.tasks import TaskGraph


@numba.njit(cache=True)
def propagate(order, position, device_start, device, duration, chain_prev, chain_next, pointer, start, end, stack):
    """Schedule every task from each device's ``pointer`` on; returns True iff no deadlock."""
    devices = device_start.size - 1
    top = 0
    for d in range(devices):
        stack[top] = d
        top += 1
    while top > 0:
        top -= 1
        d = stack[top]
        p = pointer[d]
        stop = device_start[d + 1]
        previous = end[order[p - 1]] if p > device_start[d] else 0.0
        while p < stop:
            t = order[p]
            c = chain_prev[t]
            ready = 0.0
            if c >= 0:
                if position[c] >= pointer[device[c]]:
                    break
                ready = end[c]
            s = previous if previous > ready else ready
            start[t] = s
            previous = s + duration[t]
            end[t] = previous
            p += 1
            pointer[d] = p
            n = chain_next[t]
            if n >= 0:
                dn = device[n]
                if dn != d and position[n] == pointer[dn]:
                    stack[top] = dn
                    top += 1
    for d in range(devices):
        if pointer[d] < device_start[d + 1]:
            return False
    return True


@numba.njit(cache=True)
def evaluate(order, position, device_start, device, duration, chain_prev, chain_next, pointer, start, end, stack):
    """Full evaluation; returns the makespan, or −1 for invalid orders."""
    for d in range(device_start.size - 1):
        pointer[d] = device_start[d]
    if not propagate(order, position, device_start, device, duration, chain_prev, chain_next, pointer, start, end,
                     stack):
        return -1.0
    return makespan_of(order, device_start, end)


@numba.njit(cache=True)
def rewind(order, device_start, start, end, pointer, moved_device, first_moved):
    """Incremental re-evaluation, step 1: after device ``moved_device`` was reordered from flat
    position ``first_moved`` on (``start``/``end`` still hold the previous valid schedule), point
    every device at its first task that can change; :func:`propagate` then recomputes them."""
    tau = end[order[first_moved - 1]] if first_moved > device_start[moved_device] else 0.0
    for d in range(device_start.size - 1):
        if d == moved_device:
            pointer[d] = first_moved
            continue
        lo = device_start[d]
        hi = device_start[d + 1]
        while lo < hi:
            mid = (lo + hi) // 2
            if start[order[mid]] < tau:
                lo = mid + 1
            else:
                hi = mid
        pointer[d] = lo


@numba.njit(cache=True)
def makespan_of(order, device_start, end):
    best = 0.0
    for d in range(device_start.size - 1):
        if device_start[d + 1] > device_start[d]:
            e = end[order[device_start[d + 1] - 1]]
            if e > best:
                best = e
    return best


@numba.njit(cache=True)
def device_peak(order, lo, hi, forward, memory):
    """Peak memory held on the device whose order is ``order[lo:hi]``."""
    held = 0.0
    peak = 0.0
    for p in range(lo, hi):
        t = order[p]
        if forward[t]:
            held += memory[t]
            if held > peak:
                peak = held
        else:
            held -= memory[t]
    return peak


@numba.njit(cache=True)
def device_peaks(order, device_start, forward, memory, out):
    for d in range(device_start.size - 1):
        out[d] = device_peak(order, device_start[d], device_start[d + 1], forward, memory)


@dataclass(frozen=True, eq=False)
class Timeline:
    """A simulated schedule: ``order`` (see :mod:`hydraulis.fused.tasks`), per-task ``start`` and
    ``end`` (ms), the makespan, and per-device memory peaks."""

    order: np.ndarray
    start: np.ndarray
    end: np.ndarray
    makespan_ms: float
    device_peaks: np.ndarray

    @property
    def peak_memory(self) -> float:
        return float(self.device_peaks.max())

    @property
    def memory_sum(self) -> float:
        return float(self.device_peaks.sum())


class Simulator:
    """Reusable buffers for evaluating many orders of one task graph.

    **Algorithm** (:func:`propagate`, compiled with numba). Each device keeps a pointer to its
    next unscheduled task; a device advances while the chain predecessor of its next task is done
    (a task is done iff it lies before its device's pointer). Finishing a task pushes the device of
    its chain successor when that successor is the device's next task. Every task is scheduled
    once and every push follows a finish, so a full evaluation costs ``O(T + N)``; orders are
    valid iff every pointer reaches its device's end.

    **Incremental re-evaluation.** A move that reorders device ``d`` from position ``i`` on
    changes only tasks that start at or after ``τ = end(order_d[i − 1])`` (``0`` for ``i = 0``):
    every task at or after position ``i`` starts at ``≥ τ``, so do all of its descendants, and any
    task whose new start depends on a moved task was, before the move, a descendant of one of them
    (only edges into moved tasks changed). :func:`rewind` therefore rewinds every device's
    pointer to its first task starting at ``≥ τ`` (binary search: starts are sorted along a
    device's order) and propagates from there — on average about half the work of a full pass.

    Memory is a function of the orders alone: while task ``t`` runs on device ``d``, ``d`` holds
    ``Σ μ`` over micro-batches whose forward on ``d`` has started and whose backward on ``d`` has
    not ended. A device's peak is the largest such sum right after one of its forwards starts.

    Worked example: one model, S = 2, m = 1, f = 1, b = 2 ms: ``F_0 [0, 1]`` on device 0,
    ``F_1 [1, 2]`` and ``B_1 [2, 4]`` on device 1, ``B_0 [4, 6]`` on device 0: makespan 6 ms.
    """

    def __init__(self, graph: TaskGraph) -> None:
        self.graph = graph
        n = graph.size
        self.start = np.zeros(n)
        self.end = np.zeros(n)
        self.pointer = np.zeros(graph.devices, dtype=np.int64)
        self.stack = np.zeros(graph.devices + n + 1, dtype=np.int64)

    def makespan(self, order: np.ndarray, position: np.ndarray | None = None) -> float:
        """Makespan of ``order`` (a valid per-device slicing), or −1 if it deadlocks."""
        g = self.graph
        if position is None:
            position = g.positions(order)
        return evaluate(order, position, g.device_start, g.device, g.duration, g.chain_prev, g.chain_next,
                        self.pointer, self.start, self.end, self.stack)


def simulate(graph: TaskGraph, order: np.ndarray) -> Timeline | None:
    """The exact schedule of ``order``, or ``None`` when the orders deadlock."""
    order = np.ascontiguousarray(order, dtype=np.int64)
    check_slicing(graph, order)
    simulator = Simulator(graph)
    makespan = simulator.makespan(order)
    if makespan < 0:
        return None
    peaks = np.zeros(graph.devices)
    device_peaks(order, graph.device_start, graph.forward, graph.memory, peaks)
    return Timeline(order, simulator.start.copy(), simulator.end.copy(), float(makespan), peaks)


def check_slicing(graph: TaskGraph, order: np.ndarray) -> None:
    """Raise unless ``order`` is a permutation of the tasks with each device's tasks in its slice."""
    require(order.size == graph.size, "order", order.size, f"must list all {graph.size} tasks")
    require(bool(np.array_equal(np.sort(order), np.arange(graph.size))), "order", "tasks",
            "must list every task exactly once")
    owner = np.repeat(np.arange(graph.devices), np.diff(graph.device_start))
    wrong = np.flatnonzero(graph.device[order] != owner)
    require(wrong.size == 0, "order", int(order[wrong[0]]) if wrong.size else None,
            "is placed on a device that does not run it")

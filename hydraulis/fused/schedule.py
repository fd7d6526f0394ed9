"""A fused schedule as the rest of the system sees it: one record per task, with times.

:func:`scheduled_tasks` turns a simulated :class:`~hydraulis.fused.simulate.Timeline` into
records sorted by device and start; :class:`FusedSchedule` carries them with the figures the
schedule is judged by (its makespan against the lower bound and the baselines).
"""

from __future__ import annotations

from dataclasses import dataclass

from hydraulis.cost.order import Phase
from hydraulis.fused.search import FusedResult
from hydraulis.fused.simulate import Timeline
from hydraulis.fused.tasks import TaskGraph


@dataclass(frozen=True)
class ScheduledTask:
    """Forward or backward of ``micro_batch`` of ``replica`` of ``model`` at ``stage`` on
    ``device``, running ``[start_ms, end_ms)``."""

    device: int
    model: int
    replica: int
    micro_batch: int
    stage: int
    phase: Phase
    start_ms: float
    end_ms: float


@dataclass(frozen=True)
class FusedSchedule:
    """The answer of ``hydraulis fuse``: tasks plus makespan, bound, baselines and memory."""

    makespan_ms: float
    lower_bound_ms: float
    sequential_ms: float
    greedy_ms: float
    interleaved_ms: float
    peak_memory: float
    memory_sum: float
    stop: str
    evaluations: int
    tasks: tuple[ScheduledTask, ...]


def scheduled_tasks(graph: TaskGraph, timeline: Timeline) -> tuple[ScheduledTask, ...]:
    """One record per task, sorted by device, then start."""
    order = timeline.order
    return tuple(ScheduledTask(int(graph.device[t]), int(graph.model[t]), int(graph.replica[t]),
                               int(graph.micro_batch[t]), int(graph.stage[t]), graph.phase(int(t)),
                               float(timeline.start[t]), float(timeline.end[t])) for t in order)


def fused_schedule(result: FusedResult) -> FusedSchedule:
    """The schedule record of a search result."""
    best = result.schedule
    return FusedSchedule(best.makespan_ms, result.bound.value_ms, result.sequential.makespan_ms,
                         result.greedy.makespan_ms, result.interleaved.makespan_ms, best.peak_memory,
                         best.memory_sum, result.stop.value, result.evaluations,
                         scheduled_tasks(result.graph, best))

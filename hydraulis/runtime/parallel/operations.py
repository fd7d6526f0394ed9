"""Recording what a stage executes: the order of its forwards and backwards, and their times.

:class:`RecordingWork` wraps a stage's :class:`~.pipeline.StageWork` and leaves the 1F1B
executor as it is: :func:`~.pipeline.run_1f1b` calls ``forward(j, …)`` and ``backward(j, …)``
in the order it executes them, and the wrapper notes each operation — phase, micro-batch
``j`` (execution position), start and end in ms since the stage began computing. Waiting for
a neighbour's activation or gradient happens in the stage's links, between operations, so an
operation's duration is its compute alone — what the cost model predicts as ``φ·t_j``
(forward) and ``(1 − φ)·t_j`` (backward) — while its start includes the waits before it, as the
exact simulation's start does (:func:`hydraulis.cost.simulate_1f1b`).

The clock is the wall clock on the CPU; on CUDA, events recorded on the stream and read after
the step's synchronisation, so recording adds no synchronisation of its own.

:func:`gather_operations` brings the records of every stage to every rank in one all-gather:
each rank sends ``2·v_max`` rows ``(j, forward, start, end)`` (``v_max``: the plan's most
micro-batches in a pipeline; rows past its own operations, and every row of a rank that does
not lead a stage, hold ``j = −1``); the first tensor- and context-parallel rank of each stage
speaks for the stage, whose other ranks run the same operations.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch

from hydraulis.base.types import StepPlan, Strategy
from hydraulis.cost.pipeline import Phase, ScheduledOp
from hydraulis.dispatch import micro_batch_times_ms
from hydraulis.job.overlap import rank_overlap
from hydraulis.job.records import PipelineOperations
from hydraulis.runtime.parallel.group import ParallelGroup
from hydraulis.runtime.rank_map import RankMap

COLUMNS = 4
"""Per operation: micro-batch, forward (1) or backward (0), start ms, end ms."""


class RecordingWork:
    """A stage's work (``forward(j, received)``, ``backward(j, grad)``, ``shape(j)``, ``loss``) whose operations are
    recorded as ``(phase, j, start mark, end mark)`` on the step's ``clock`` (:func:`step_clock`)."""

    def __init__(self, work, clock: WallClock | CudaClock) -> None:
        self.work = work
        self.clock = clock
        self.marks: list[tuple[Phase, int, object, object]] = []

    def shape(self, j: int) -> tuple[int, int]:
        return self.work.shape(j)

    @property
    def loss(self) -> torch.Tensor:
        return self.work.loss

    def forward(self, j: int, received: torch.Tensor | None) -> torch.Tensor | None:
        start = self.clock.mark()
        out = self.work.forward(j, received)
        self.marks.append((Phase.FORWARD, j, start, self.clock.mark()))
        return out

    def backward(self, j: int, grad: torch.Tensor | None) -> torch.Tensor | None:
        start = self.clock.mark()
        out = self.work.backward(j, grad)
        self.marks.append((Phase.BACKWARD, j, start, self.clock.mark()))
        return out

    def rows(self) -> list[tuple[int, int, float, float]]:
        """The operations as ``(j, forward, start ms, end ms)``, in execution order (after the
        step's synchronisation on CUDA)."""
        return [(j, int(phase is Phase.FORWARD), self.clock.ms(start), self.clock.ms(end))
                for phase, j, start, end in self.marks]


def gather_operations(rows: Sequence[tuple[int, int, float, float]], leads_stage: bool, rank_map: RankMap,
                      plan: StepPlan, strategy: Strategy, world: ParallelGroup,
                      device: torch.device) -> tuple[PipelineOperations, ...]:
    """Every pipeline's operations, on every rank (module docstring); ``rows`` are this rank's
    (:meth:`RecordingWork.rows`), ``leads_stage`` whether it speaks for its stage."""
    width = 2 * max((len(p.micro_batches) for p in plan.pipelines), default=0)
    local = torch.full((width, COLUMNS), -1.0, dtype=torch.float64)
    if leads_stage and rows:
        local[:len(rows)] = torch.tensor(rows, dtype=torch.float64)
    every = world.all_gather(local.to(device)).view(world.size, width, COLUMNS).cpu()
    times = micro_batch_times_ms(plan, strategy)
    recorded = []
    for p in range(len(plan.pipelines)):
        ops = []
        for rank in rank_map.pipeline_ranks(p):
            place = rank_map.place(rank)
            ops += [ScheduledOp(place.stage, int(j), Phase.FORWARD if forward else Phase.BACKWARD, start, end)
                    for j, forward, start, end in every[rank].tolist() if j >= 0]
        recorded.append(PipelineOperations(p, tuple(times[p]), tuple(sorted(ops, key=lambda op: op.stage))))
    return tuple(recorded)


def gather_reduction_overlap(buckets: Sequence[tuple[float, float]], rows: Sequence[tuple[int, int, float, float]],
                             world: ParallelGroup, device: torch.device) -> tuple[float, float]:
    """``(in flight, hidden)`` ms of the step's reduction (:mod:`hydraulis.job.overlap`), on
    every rank: this rank's :func:`~hydraulis.job.overlap.rank_overlap` of its ``buckets``
    against its own backwards in ``rows`` (one clock), summed over the ranks in one all-reduce."""
    mine = rank_overlap(buckets, [(a, b) for _, forward, a, b in rows if not forward])
    return tuple(world.all_reduce(torch.tensor(mine, dtype=torch.float64, device=device)).cpu().tolist())


def step_clock(device: torch.device) -> WallClock | CudaClock:
    """The step's one clock, its origin now: the wall clock on the CPU, events on the stream on
    CUDA. It times the step's phases (:meth:`~WallClock.elapsed_ms`) and, with
    ``record_operations``, the operations and the exchanges' buckets."""
    return CudaClock() if device.type == "cuda" else WallClock()


class WallClock:
    """Marks are ``time.perf_counter()`` values."""

    def __init__(self) -> None:
        self.origin = time.perf_counter()

    def mark(self) -> float:
        return time.perf_counter()

    def ms(self, mark: float) -> float:
        return (mark - self.origin) * 1e3

    def elapsed_ms(self, marks: Sequence[float]) -> tuple[float, ...]:
        """Milliseconds from the origin to the first of ``marks`` and between consecutive ones."""
        times = [0.0, *map(self.ms, marks)]
        return tuple(b - a for a, b in zip(times, times[1:]))


class CudaClock:
    """Marks are CUDA events recorded on the current stream, read after the step's
    synchronisation."""

    def __init__(self) -> None:
        self.origin = self.mark()

    def mark(self) -> torch.cuda.Event:
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def ms(self, mark: torch.cuda.Event) -> float:
        return self.origin.elapsed_time(mark)

    def elapsed_ms(self, marks: Sequence[torch.cuda.Event]) -> tuple[float, ...]:
        """As :meth:`WallClock.elapsed_ms`, after waiting for the last mark: the step's one
        synchronisation."""
        marks[-1].synchronize()
        times = [0.0, *map(self.ms, marks)]
        return tuple(b - a for a, b in zip(times, times[1:]))

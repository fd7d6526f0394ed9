"""Predicted time of a strategy on sampled steps: a simple two-stage dispatch judged by 1F1B.

The planner judges every candidate strategy — its own answers and the homogeneous ones it
compares with — by the same rule, on the same sampled steps:

1. **Sequences → pipelines.** Longest first, each sequence goes to the pipeline, among those
   whose ``max_seq_len`` holds it, that would finish earliest by the estimate
   ``W + c + (p − 1)·(c + w_first)`` (work, one micro-batch's fixed cost, and the bubble of
   its longest micro-batch ``w_first``, the first sequence it got).
2. **Sequences → micro-batches.** Each micro-batch holds at most ``max_seq_len`` tokens (the
   memory bound). ``pp = 1``: first-fit decreasing by tokens (fewest micro-batches, least ``c``).
   ``pp > 1``: the better, by exact 1F1B simulation, of that packing and a time-balanced one
   with ``v ≈ √((p − 1)·W/c)`` micro-batches (planner/fluid.py), longest micro-batch first.
3. **Step** = the slowest pipeline (exact 1F1B simulation, cost/pipeline.py) + the gradient
   reduction into the optimizer layout the backward cannot hide (cost/step.py).

The per-step dispatcher (hydraulis/dispatch) plans steps for real; this is the planner's
yardstick, deterministic and about 3× cheaper per (strategy, step) pair, which the planner's
search judges by the hundreds; ``tests/planner/test_yardstick.py`` holds it within [0.98, 1.2]×
of the dispatcher on the committed 7B proposal (docs/results.md).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from hydraulis.base.errors import HydraulisError
from hydraulis.base.first_fit import MANY_BINS, first_fit_tree
from hydraulis.base.types import OptimizerLayout, PipelineGroup, PipelineModel, Strategy
from hydraulis.cost import ReductionModel, exposed_reduce_ms, pipeline_times_1f1b, step_time_ms


@dataclass(frozen=True)
class CostContext:
    """What turns a strategy and a step into a time besides the strategy itself."""

    params: int
    layout: OptimizerLayout
    reduce_gbps: float
    pipeline_model: PipelineModel
    reduce_overlap: float = 0.0
    grad_reduce_bytes: int = 2

    def reduction_ms(self, strategy: Strategy) -> float:
        """The exposed reduction of ``strategy`` (:func:`hydraulis.cost.exposed_reduce_ms`)."""
        model = ReductionModel(self.reduce_gbps, self.reduce_overlap, pipeline_model=self.pipeline_model,
                               gradient_bytes=self.grad_reduce_bytes)
        return exposed_reduce_ms(self.params, strategy.expanded(), self.layout, model)


@dataclass(frozen=True)
class StepEstimate:
    """One step on one strategy: its time and, per pipeline group, the largest micro-batch."""

    step_ms: float
    peak_tokens: tuple[int, ...]


def estimate_step(strategy: Strategy, lengths: np.ndarray, context: CostContext) -> StepEstimate:
    """Steps 1–3 of the module docstring for one step's ``lengths``."""
    order = np.sort(np.asarray(lengths, dtype=np.int64))[::-1]
    shares = _dispatch(strategy.pipelines, order)
    times, peaks = [], []
    for group, pipelines in zip(strategy.pipelines, shares):
        timed = _pipelines(group, [p for p in pipelines if p], context.pipeline_model)
        times += [pipe_ms for pipe_ms, _ in timed]
        peaks.append(max((tokens for _, tokens in timed), default=0))
    return StepEstimate(step_time_ms(times, context.reduction_ms(strategy)), tuple(peaks))


def _dispatch(groups: tuple[PipelineGroup, ...], order: np.ndarray) -> list[list[list[int]]]:
    """Stage 1: per group, per pipeline, the lengths it gets (longest first)."""
    s = order.astype(np.float64)
    heaps = [[(0.0, i) for i in range(g.count)] for g in groups]
    shares: list[list[list[int]]] = [[[] for _ in range(g.count)] for g in groups]
    columns = [(gi, g.max_seq_len, g.scheme.pp - 1, g.scheme.pp * g.time.c, heaps[gi], shares[gi],
                g.time.work_ms(s).tolist()) for gi, g in enumerate(groups)]
    if len(columns) == 1:
        return [_dispatch_one(columns[0], order, groups)]
    for index, length in enumerate(order.tolist()):
        best, best_estimate = -1, math.inf
        for gi, capacity, bubble, fixed, heap, share, work in columns:
            if capacity < length:
                continue
            top, i = heap[0]
            w = work[index]
            estimate = top + w if share[i] else w + fixed + bubble * w
            if estimate < best_estimate:
                best, best_estimate = gi, estimate
        if best < 0:
            raise HydraulisError("lengths", length, f"exceeds every pipeline of strategy {Strategy(groups)}")
        _, i = heaps[best][0]
        shares[best][i].append(length)
        heapq.heapreplace(heaps[best], (best_estimate, i))
    return shares


def _dispatch_one(column: tuple, order: np.ndarray, groups: tuple[PipelineGroup, ...]) -> list[list[int]]:
    """Stage 1 for a strategy of one group: the rule of :func:`_dispatch` without the choice
    between groups — every sequence to the pipeline on top of the heap."""
    _, capacity, bubble, fixed, heap, share, work = column
    if order.size and capacity < order[0]:
        raise HydraulisError("lengths", int(order[0]), f"exceeds every pipeline of strategy {Strategy(groups)}")
    replace_top = heapq.heapreplace
    for length, w in zip(order.tolist(), work):
        top, i = heap[0]
        held = share[i]
        replace_top(heap, (top + w if held else w + fixed + bubble * w, i))
        held.append(length)
    return share


def _pipelines(group: PipelineGroup, shares: list[list[int]], model: PipelineModel) -> list[tuple[float, int]]:
    """Stage 2 for the pipelines of one group (each share non-empty): per pipeline its time and
    its largest micro-batch in tokens. ``pp = 1``: ``v·c + Σ work``, what the 1F1B simulation of
    one stage gives; ``pp > 1``: every candidate packing of every pipeline simulated at once
    (:func:`hydraulis.cost.pipeline_times_1f1b`), the first fastest kept."""
    pp, c = group.scheme.pp, group.time.c
    timed, candidates = [], []
    for lengths in shares:
        s = np.asarray(lengths, dtype=np.float64)
        work = group.time.work_ms(s).tolist()
        packings = [_first_fit(lengths, group.max_seq_len)]
        if pp == 1:
            timed.append((c * len(packings[0]) + sum(work), max(sum(lengths[i] for i in b) for b in packings[0])))
            continue
        target = len(lengths) if c == 0 else round(math.sqrt((pp - 1) * sum(work) / c))
        micro_batches = min(len(lengths), max(len(packings[0]), target))
        if micro_batches != len(packings[0]):
            packings.append(_balanced(lengths, work, group.max_seq_len, micro_batches))
        candidates.append([(sorted((c + sum(work[i] for i in b) for b in bins), reverse=True),
                            max(sum(lengths[i] for i in b) for b in bins)) for bins in packings])
    if pp == 1:
        return timed
    rows = [(p, k) for p, packings in enumerate(candidates) for k in range(len(packings))]
    makespans = {}
    for v in sorted({len(candidates[p][k][0]) for p, k in rows}):
        batch = [(p, k) for p, k in rows if len(candidates[p][k][0]) == v]
        for key, ms in zip(batch, pipeline_times_1f1b(np.array([candidates[p][k][0] for p, k in batch]), pp, model)):
            makespans[key] = float(ms)
    for p, packings in enumerate(candidates):
        best = min(range(len(packings)), key=lambda k: (makespans[p, k], k))
        timed.append((makespans[p, best], packings[best][1]))
    return timed


def _first_fit(lengths: list[int], capacity: int) -> list[list[int]]:
    """First-fit decreasing by tokens (``lengths`` arrive longest first); one bin when all fit;
    over a tree of rooms when many bins are expected (:func:`hydraulis.base.first_fit.first_fit_tree`)."""
    total = sum(lengths)
    if total <= capacity:
        return [list(range(len(lengths)))]
    if total > MANY_BINS * capacity:
        return first_fit_tree(lengths, capacity)
    bins: list[list[int]] = []
    room: list[int] = []
    for i, length in enumerate(lengths):
        for target, free in enumerate(room):
            if free >= length:
                break
        else:
            bins.append([])
            room.append(capacity)
            target = len(bins) - 1
        bins[target].append(i)
        room[target] -= length
    return bins


def _balanced(lengths: list[int], work: list[float], capacity: int, count: int) -> list[list[int]]:
    """Longest-processing-time-first into ``count`` micro-batches by work, within ``capacity``
    tokens; a sequence that fits none opens another. The least loaded micro-batch with room
    (the first on ties) comes off a heap of ``(load, index)``; those without room are set
    aside until the sequence is placed, so a sequence costs ``O(log count)`` while the
    capacity does not bind."""
    bins: list[list[int]] = [[] for _ in range(count)]
    room = [capacity] * count
    heap = [(0.0, b) for b in range(count)]
    for i, length in enumerate(lengths):
        aside = []
        while heap and room[heap[0][1]] < length:
            aside.append(heapq.heappop(heap))
        if heap:
            load, target = heap[0]
            heapq.heapreplace(heap, (load + work[i], target))
        else:
            bins.append([])
            room.append(capacity)
            target = len(bins) - 1
            heapq.heappush(heap, (work[i], target))
        for entry in aside:
            heapq.heappush(heap, entry)
        bins[target].append(i)
        room[target] -= length
    return [members for members in bins if members]

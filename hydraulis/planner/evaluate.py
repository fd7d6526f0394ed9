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
   reduction into the optimizer layout the backward cannot hide (cost/step.py); the search's
   :func:`step_ms` gives the same float, timing only the pipelines that may be the slowest.

The per-step dispatcher (hydraulis/dispatch) plans steps for real; this is the planner's
yardstick, deterministic and about 3× cheaper per (strategy, step) pair, which the planner's
search judges by the hundreds; ``tests/planner/test_yardstick.py`` holds it within [0.98, 1.2]×
of the dispatcher on the committed 7B proposal (docs/results.md).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from hydraulis.base.errors import HydraulisError
from hydraulis.base.first_fit import MANY_BINS, first_fit_tree
from hydraulis.base.types import OptimizerLayout, PipelineGroup, PipelineModel, Strategy
from hydraulis.cost import (
    ReductionModel,
    exposed_reduce_ms,
    pipeline_times_1f1b,
    step_time_ms,
)


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
    """Steps 1–3 of the module docstring for one step's ``lengths``, every pipeline's packing
    chosen (so the peaks are those of the packings used)."""
    pipelines, reduction = _staged(strategy, lengths, context, every_pipeline=True)
    peaks = [0] * len(strategy.pipelines)
    for pipeline in pipelines:
        peaks[pipeline.group] = max(peaks[pipeline.group], pipeline.peak)
    return StepEstimate(step_time_ms([p.ms for p in pipelines], reduction), tuple(peaks))


def step_ms(strategy: Strategy, lengths: np.ndarray, context: CostContext) -> float:
    """``estimate_step(...).step_ms``, the same float, choosing the packing only of pipelines
    that may be the slowest.

    **Only the slowest pipeline counts.** A pipeline's time is ``T = min(T_ff, T_bal)`` over
    its candidate packings, and the step takes ``max_q T_q``. Every packing's 1F1B time is at
    least the closed form ``(p − 1)·(f_1 + d) + Σ_j t_j + (p − 1)·(b_v + d)`` (cost/pipeline.py),
    hence at least

        B_q = (p − 1)·(φ·(c + w_max) + d) + ⌈N/C⌉·c + W + (p − 1)·((1 − φ)·c + d)

    (the longest micro-batch holds the longest sequence, of work ``w_max``; every micro-batch
    costs at least ``c``; ``N`` tokens in micro-batches of at most ``C`` make at least ``⌈N/C⌉``
    of them; ``W`` the pipeline's work). And first-fit's ``v`` micro-batches, the longest
    ``t_1``, take at most ``U_q = (v + p − 1)·(t_1 + 2d)``: a schedule's time is its graph's
    longest path, which grows with every duration; ``t_1`` for every micro-batch and ``d`` moved
    into every operation (``φ·t_1 + d``, ``(1 − φ)·t_1 + d``, no hand-off latency) lengthen every
    path, and equal micro-batches without latency take ``(v + p − 1)·t`` under 1F1B. With the
    floor ``F = max(times known, max_q B_q)``, the pipeline of the largest ``B_q`` is timed in
    full and ``F`` rises to its ``T``; another with ``U_q < F`` is not simulated; the rest get
    first-fit, simulated; then, in decreasing ``T_ff``, one with ``T_ff ≤ F`` is left at ``T_ff``
    (it and every later one cannot raise the maximum, ``T_q ≤ T_ff``), any other gets its
    balanced packing and ``F`` becomes at least its ``T_q``. The maximum is the same float
    (bounds are taken with a margin of 10⁻⁹, far above their rounding). Worked example: three
    ``pp = 4`` pipelines with ``B = (92, 80, 30)``, ``U = (130, 110, 60)`` ms: the first is timed,
    first-fit 100, balanced 95, so ``F = 95``; the third is not simulated (60 < 95); the second's
    first-fit takes 96 > 95, so it is balanced too, 94: the step's maximum is 95.
    """
    pipelines, reduction = _staged(strategy, lengths, context, every_pipeline=False)
    return step_time_ms([p.ms for p in pipelines], reduction)


def _dispatch(groups: tuple[PipelineGroup, ...], order: np.ndarray) -> list[list[list[int]]]:
    """Stage 1: per group, per pipeline, the lengths it gets (longest first). Since ``order``
    descends, the groups that can hold a sequence only grow along it: the sequences fall into
    runs with one set of such groups each, dealt without a capacity test, a run for one group
    straight onto its heap."""
    if order.size and max(g.max_seq_len for g in groups) < order[0]:
        raise HydraulisError("lengths", int(order[0]), f"exceeds every pipeline of strategy {Strategy(groups)}")
    s = order.astype(np.float64)
    shares: list[list[list[int]]] = [[[] for _ in range(g.count)] for g in groups]
    columns = [(g.scheme.pp - 1, g.scheme.pp * g.time.c, [(0.0, i) for i in range(g.count)], share,
                g.time.work_ms(s).tolist()) for g, share in zip(groups, shares)]
    starts = [int(np.searchsorted(-order, -g.max_seq_len)) for g in groups]
    bounds = sorted(set(starts) | {order.size})
    lengths = order.tolist()
    for start, stop in zip(bounds, bounds[1:]):
        held = [column for column, first in zip(columns, starts) if first <= start]
        if len(held) == 1:
            _deal_one(held[0], lengths, start, stop)
        else:
            _deal(held, lengths, start, stop)
    return shares


def _deal(columns: list[tuple], lengths: list[int], start: int, stop: int) -> None:
    """Sequences ``start … stop − 1`` each to the pipeline, among the columns' heaps, that would
    finish earliest (the first group on ties)."""
    replace_top = heapq.heapreplace
    for index in range(start, stop):
        best, best_estimate = None, math.inf
        for column in columns:
            bubble, fixed, heap, share, work = column
            top, i = heap[0]
            w = work[index]
            estimate = top + w if share[i] else w + fixed + bubble * w
            if estimate < best_estimate:
                best, best_estimate = column, estimate
        heap, share = best[2], best[3]
        i = heap[0][1]
        share[i].append(lengths[index])
        replace_top(heap, (best_estimate, i))


def _deal_one(column: tuple, lengths: list[int], start: int, stop: int) -> None:
    """:func:`_deal` for one group: every sequence to the pipeline on top of its heap."""
    bubble, fixed, heap, share, work = column
    replace_top = heapq.heapreplace
    for index in range(start, stop):
        top, i = heap[0]
        w = work[index]
        held = share[i]
        replace_top(heap, (top + w if held else w + fixed + bubble * w, i))
        held.append(lengths[index])


_ROUNDING = 1e-9
"""Relative margin on the bounds of :func:`step_ms`, far above their floating-point rounding."""


@dataclass
class _Pipeline:
    """One pipeline's stage 2 in progress: its group's index, its sequences (longest first) and
    their work, its candidate packings as (micro-batch times longest first, largest micro-batch
    in tokens), and the time and largest micro-batch of the first fastest so far."""

    group: int
    lengths: list[int]
    work: list[float]
    packings: list[tuple[list[float], int]]
    ms: float = math.inf
    peak: int = 0


def _staged(strategy: Strategy, lengths: np.ndarray, context: CostContext,
            every_pipeline: bool) -> tuple[list[_Pipeline], float]:
    """Stages 1 and 2: the pipelines that got sequences, timed (every one, or those
    :func:`step_ms` needs); and the strategy's reduction. ``pp = 1``: first-fit, ``v·c + Σ work``
    (what the 1F1B simulation of one stage gives); ``pp > 1``: first-fit simulated, then the
    time-balanced packing as a second candidate."""
    groups, model = strategy.pipelines, context.pipeline_model
    shares = _dispatch(groups, np.sort(np.asarray(lengths, dtype=np.int64))[::-1])
    pipelines = [_Pipeline(gi, held, group.time.work_ms(np.asarray(held, dtype=np.float64)).tolist(), [])
                 for gi, (group, share) in enumerate(zip(groups, shares)) for held in share if held]
    for pipeline in pipelines:
        if groups[pipeline.group].scheme.pp == 1 or every_pipeline:
            _pack_first_fit(pipeline, groups[pipeline.group])
    staged = [p for p in pipelines if groups[p.group].scheme.pp > 1]
    if every_pipeline:
        _simulate(staged, groups, model)
        _add_balanced([p for p in staged if _balanced_count(p, groups[p.group]) is not None], groups, model)
        return pipelines, _reduction_ms(context, strategy)
    bounds = {id(p): _lower_bound(p, groups[p.group], model) for p in staged}
    floor = max([p.ms for p in pipelines if groups[p.group].scheme.pp == 1]
                + [bound * (1.0 - _ROUNDING) for bound in bounds.values()])
    first = max(staged, key=lambda p: bounds[id(p)], default=None)
    if first is not None:
        _pack_first_fit(first, groups[first.group])
        _simulate([first], groups, model)
        if _balanced_count(first, groups[first.group]) is not None:
            _add_balanced([first], groups, model)
        floor = max(floor, first.ms)
    rest = [p for p in staged
            if p is not first and _coarse_upper_bound(p, groups[p.group], model) * (1.0 + _ROUNDING) >= floor]
    for pipeline in rest:
        _pack_first_fit(pipeline, groups[pipeline.group])
    rest = [p for p in rest if _upper_bound(p, groups[p.group], model) * (1.0 + _ROUNDING) >= floor]
    _simulate(rest, groups, model)
    second = [p for p in rest if _balanced_count(p, groups[p.group]) is not None]
    floor = max([floor] + [p.ms for p in rest if _balanced_count(p, groups[p.group]) is None])
    for pipeline in sorted(second, key=lambda p: -p.ms):
        if pipeline.ms <= floor:
            break
        _add_balanced([pipeline], groups, model)
        floor = max(floor, pipeline.ms)
    return [p for p in pipelines if p.ms < math.inf], _reduction_ms(context, strategy)


@lru_cache(maxsize=4096)
def _reduction_ms(context: CostContext, strategy: Strategy) -> float:
    """``context.reduction_ms(strategy)``, once per strategy: the judge asks it on every step."""
    return context.reduction_ms(strategy)


def _pack_first_fit(pipeline: _Pipeline, group: PipelineGroup) -> None:
    """The pipeline's first-fit packing as its first candidate; ``pp = 1``: its time."""
    pipeline.packings.append(_timed(_first_fit(pipeline.lengths, group.max_seq_len), pipeline, group))
    if group.scheme.pp == 1:
        times, pipeline.peak = pipeline.packings[0]
        pipeline.ms = group.time.c * len(times) + sum(pipeline.work)


def _timed(bins: list[list[int]], pipeline: _Pipeline, group: PipelineGroup) -> tuple[list[float], int]:
    """A packing's micro-batch times, longest first, and its largest micro-batch in tokens."""
    c, work, held = group.time.c, pipeline.work, pipeline.lengths
    return (sorted((c + sum(work[i] for i in b) for b in bins), reverse=True),
            max(sum(held[i] for i in b) for b in bins))


def _balanced_count(pipeline: _Pipeline, group: PipelineGroup) -> int | None:
    """The time-balanced packing's micro-batches, ``v ≈ √((p − 1)·W/c)`` (planner/fluid.py) kept
    between first-fit's count and one a sequence; None when it is first-fit's count."""
    pp, c, first_fit = group.scheme.pp, group.time.c, len(pipeline.packings[0][0])
    target = len(pipeline.lengths) if c == 0 else round(math.sqrt((pp - 1) * sum(pipeline.work) / c))
    count = min(len(pipeline.lengths), max(first_fit, target))
    return None if count == first_fit else count


def _add_balanced(pipelines: list[_Pipeline], groups: tuple[PipelineGroup, ...], model: PipelineModel) -> None:
    """Each pipeline's time-balanced packing as a second candidate, simulated."""
    for pipeline in pipelines:
        group = groups[pipeline.group]
        bins = _balanced(pipeline.lengths, pipeline.work, group.max_seq_len, _balanced_count(pipeline, group))
        pipeline.packings.append(_timed(bins, pipeline, group))
    _simulate(pipelines, groups, model)


def _lower_bound(pipeline: _Pipeline, group: PipelineGroup, model: PipelineModel) -> float:
    """``B`` of :func:`step_ms`: at most the time of any packing of the pipeline."""
    pp, c, phi, d = group.scheme.pp, group.time.c, model.forward_fraction, model.p2p_ms
    fewest = -(-sum(pipeline.lengths) // group.max_seq_len)
    return ((pp - 1) * (phi * (c + max(pipeline.work)) + d) + fewest * c + sum(pipeline.work)
            + (pp - 1) * ((1.0 - phi) * c + d))


def _upper_bound(pipeline: _Pipeline, group: PipelineGroup, model: PipelineModel) -> float:
    """``(v + p − 1)·(t_1 + 2·d)`` of first-fit's ``v`` micro-batches, the longest ``t_1``: at
    least the pipeline's time (:func:`step_ms`)."""
    times = pipeline.packings[0][0]
    return (len(times) + group.scheme.pp - 1) * (times[0] + 2.0 * model.p2p_ms)


def _coarse_upper_bound(pipeline: _Pipeline, group: PipelineGroup, model: PipelineModel) -> float:
    """``U`` of :func:`step_ms` before packing: first-fit leaves no two micro-batches at most half
    full (the later one's first sequence would have fitted the earlier), so ``v ≤ ⌊2N/C⌋ + 1``
    and ``v ≤ n``; a micro-batch of at most ``C`` tokens works at most ``a·C² + b·C`` and at
    most ``W``."""
    capacity, time = group.max_seq_len, group.time
    count = min(len(pipeline.lengths), 2 * sum(pipeline.lengths) // capacity + 1)
    longest = time.c + min(sum(pipeline.work), time.a * capacity * capacity + time.b * capacity)
    return (count + group.scheme.pp - 1) * (longest + 2.0 * model.p2p_ms)


def _simulate(pipelines: list[_Pipeline], groups: tuple[PipelineGroup, ...], model: PipelineModel) -> None:
    """Exact 1F1B times of each pipeline's newest packing, those of one ``(p, v)`` in one call
    (:func:`hydraulis.cost.pipeline_times_1f1b`); a pipeline keeps its first fastest packing."""
    batches: dict[tuple[int, int], list[_Pipeline]] = {}
    for pipeline in pipelines:
        batches.setdefault((groups[pipeline.group].scheme.pp, len(pipeline.packings[-1][0])), []).append(pipeline)
    for (pp, _), batch in batches.items():
        rows = np.array([p.packings[-1][0] for p in batch])
        for pipeline, ms in zip(batch, pipeline_times_1f1b(rows, pp, model).tolist()):
            if ms < pipeline.ms:
                pipeline.ms, pipeline.peak = ms, pipeline.packings[-1][1]


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

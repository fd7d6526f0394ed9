"""Batching methods side by side over many steps, and the micro-batch times and 1F1B timelines
behind a plan.

For each method, every batch is dispatched and summarised by its predicted step time ``T``,
its ratio to the plan's lower bound ``T/LB`` (:mod:`hydraulis.dispatch.dispatcher`), its ratio
to design §6's work bound ``T/LB_work`` (:func:`work_lower_bound_ms`), and the planning time
(median and 90th percentile, the nearest-rank order statistic).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from hydraulis.base.errors import require
from hydraulis.base.types import BatchingMethod, Proposal, StepPlan, Strategy
from hydraulis.cost import PipelineTimeline, simulate_1f1b
from hydraulis.dispatch.bounds import work_lower_bound_ms
from hydraulis.dispatch.dispatcher import dispatch
from hydraulis.dispatch.options import DispatchOptions


@dataclass(frozen=True)
class MethodSummary:
    """One batching method over ``steps`` batches; ``chosen[k]`` counts the steps that ran
    strategy ``k`` of the proposal, ``synthesised`` those that ran a strategy made for them."""

    method: BatchingMethod
    steps: int
    mean_ms: float
    median_ms: float
    median_ratio: float
    p90_ratio: float
    median_work_ratio: float
    planning_median_ms: float
    planning_p90_ms: float
    chosen: tuple[int, ...]
    synthesised: int = 0


def compare_methods(proposal: Proposal, batches: Sequence[np.ndarray], options: DispatchOptions = DispatchOptions(),
                    methods: Sequence[BatchingMethod] = tuple(BatchingMethod)) -> tuple[MethodSummary, ...]:
    """Dispatch every batch with every method (in that order) and summarise each method."""
    require(len(batches) > 0, "steps", 0, "must be at least 1")
    work_bounds = np.array([work_lower_bound_ms(proposal, b, options.alignment) for b in batches])
    return tuple(summarise_plans(method, [dispatch(proposal, batch, method, options) for batch in batches],
                                 work_bounds, len(proposal.strategies))
                 for method in methods)


class PlanFigures(Protocol):
    """What a summary needs of a step plan (a :class:`StepPlan` has it; ``strategy_index`` −1:
    a synthesised strategy)."""

    strategy_index: int
    predicted_ms: float
    lower_bound_ms: float
    planning_ms: float


def summarise_plans(method: BatchingMethod, plans: Sequence[PlanFigures], work_bounds_ms: np.ndarray,
                    strategies: int) -> MethodSummary:
    """The :class:`MethodSummary` of ``plans`` (one per step, each step's work bound given) made
    with ``method`` under a proposal of ``strategies`` strategies."""
    predicted = np.array([p.predicted_ms for p in plans])
    ratio = predicted / np.array([p.lower_bound_ms for p in plans])
    planning = np.array([p.planning_ms for p in plans])
    return MethodSummary(
        method=method,
        steps=len(plans),
        mean_ms=float(predicted.mean()),
        median_ms=float(np.median(predicted)),
        median_ratio=float(np.median(ratio)),
        p90_ratio=_p90(ratio),
        median_work_ratio=float(np.median(predicted / work_bounds_ms)),
        planning_median_ms=float(np.median(planning)),
        planning_p90_ms=_p90(planning),
        chosen=tuple(np.bincount([p.strategy_index for p in plans if p.strategy_index >= 0],
                                 minlength=strategies).tolist()),
        synthesised=sum(p.strategy_index < 0 for p in plans),
    )


def micro_batch_times_ms(plan: StepPlan, strategy: Strategy) -> list[list[float]]:
    """Per pipeline, the per-stage time of each micro-batch in execution order, as dispatch
    timed it: ``c + Σ (a·s'² + b·s')`` over aligned lengths ``s'`` (for ``padding`` every
    sequence counts as the step's longest); ``strategy`` is the one the plan runs
    (``plan.strategy(proposal)``)."""
    groups = strategy.expanded()
    aligned = [[[-(-s // plan.alignment) * plan.alignment for s in mb.lengths] for mb in p.micro_batches]
               for p in plan.pipelines]
    if plan.method is BatchingMethod.PADDING:
        longest = max(s for pipeline in aligned for mb in pipeline for s in mb)
        aligned = [[[longest] * len(mb) for mb in pipeline] for pipeline in aligned]
    return [[group.time.microbatch_ms(mb) for mb in pipeline] for group, pipeline in zip(groups, aligned)]


def pipeline_timelines(plan: StepPlan, proposal: Proposal) -> tuple[PipelineTimeline, ...]:
    """Per pipeline, the exact 1F1B schedule of its micro-batches with every operation recorded
    (:func:`hydraulis.cost.simulate_1f1b` on :func:`micro_batch_times_ms`); an idle pipeline has
    an empty timeline."""
    return tuple(simulate_1f1b(times, p.scheme.pp, proposal.pipeline_model, record=True) if times
                 else PipelineTimeline(0.0)
                 for p, times in zip(plan.pipelines, micro_batch_times_ms(plan, plan.strategy(proposal))))


def _p90(values: np.ndarray) -> float:
    return float(np.percentile(values, 90, method="inverted_cdf"))

"""A simple, deterministic step planner — a stand-in for :mod:`hydraulis.dispatch`.

The runtime must not wait for the dispatcher to be tested, so ``hydraulis train`` and
``hydraulis check-equivalence`` plan with this greedy method (the batching method
``dispatch_fixed_packing``); they switch to the real dispatcher once it lands.

1. Sequences, longest first, each go to the pipeline whose predicted work after taking it,
   ``Σ (a·s² + b·s)`` with the pipeline's time coefficients, is smallest (ties: lowest index).
2. Per pipeline, first-fit decreasing packs its sequences into micro-batches of at most
   ``capacity`` tokens (a longer sequence gets a micro-batch of its own).
3. Each pipeline's predicted time is the exact 1F1B simulation of its micro-batches
   (:func:`hydraulis.cost.simulate_1f1b`); the step's is the slowest pipeline's.

Worked example, lengths (40, 30, 20, 10), two equal pipelines, capacity 50: pipeline 0 gets 40
and 10, pipeline 1 gets 30 and 20; micro-batches (40, 10) and (30, 20).
"""

from __future__ import annotations

from collections.abc import Sequence

from hydraulis.cost import lower_bound_ms, microbatch_time_ms, sequence_time_ms, simulate_1f1b
from hydraulis.errors import require_int
from hydraulis.runtime.layout import StrategyLayout
from hydraulis.types import BatchingMethod, MicroBatch, PipelineModel, PipelinePlan, Scheme, StepPlan


def simple_plan(lengths: Sequence[int], layout: StrategyLayout, capacity: int,
                pipeline_model: PipelineModel = PipelineModel(), strategy_index: int = 0) -> StepPlan:
    """The plan of the module docstring for one global batch of ``lengths``."""
    require_int(capacity, "micro_batch_tokens", minimum=1)
    groups = layout.strategy.expanded()
    work = [0.0] * len(groups)
    assigned: list[list[int]] = [[] for _ in groups]
    for index in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        cost = [work[p] + float(sequence_time_ms(g.time, [lengths[index]])[0]) for p, g in enumerate(groups)]
        best = min(range(len(groups)), key=lambda p: (cost[p], p))
        work[best] = cost[best]
        assigned[best].append(index)
    pipelines = []
    for group, sequences in zip(groups, assigned):
        micro_batches = _first_fit_decreasing(sequences, lengths, capacity)
        times = [microbatch_time_ms(group.time, mb.lengths) for mb in micro_batches]
        predicted = simulate_1f1b(times, group.scheme.pp, pipeline_model).makespan_ms if times else 0.0
        pipelines.append(PipelinePlan(group.scheme, group.max_seq_len, micro_batches, predicted, "greedy"))
    bound = lower_bound_ms(lengths, [(g.scheme, g.time, g.max_seq_len) for g in layout.strategy.pipelines],
                           layout.devices)
    return StepPlan(strategy_index, BatchingMethod.DISPATCH_FIXED_PACKING, max(p.predicted_ms for p in pipelines),
                    bound, 0.0, tuple(pipelines))


def single_device_plan(lengths: Sequence[int]) -> StepPlan:
    """The whole batch as one micro-batch on one (1,1,1) pipeline: the reference's plan."""
    batch = MicroBatch(tuple(range(len(lengths))), tuple(lengths))
    pipeline = PipelinePlan(Scheme(1, 1, 1), max(lengths), (batch,), 0.0, "reference")
    return StepPlan(0, BatchingMethod.FIXED_PACKING, 0.0, 0.0, 0.0, (pipeline,))


def _first_fit_decreasing(sequences: list[int], lengths: Sequence[int], capacity: int) -> tuple[MicroBatch, ...]:
    bins: list[list[int]] = []
    loads: list[int] = []
    for index in sorted(sequences, key=lambda i: (-lengths[i], i)):
        target = next((b for b, load in enumerate(loads) if load + lengths[index] <= capacity), None)
        if target is None:
            bins.append([index])
            loads.append(lengths[index])
        else:
            bins[target].append(index)
            loads[target] += lengths[index]
    return tuple(MicroBatch(tuple(b), tuple(lengths[i] for i in b)) for b in bins)

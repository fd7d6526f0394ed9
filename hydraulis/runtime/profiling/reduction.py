"""Measuring what a training step costs beyond its pipelines' compute (the per-rank job).

A training step (:class:`~hydraulis.runtime.step.StepRunner`) propagates the weights from the
optimizer layout to the compute layout, runs the pipelines, reduces the gradients into the
optimizer layout and updates there. The cost model counts the first and the last two as the
step's reduction ``T_reduce`` (:mod:`hydraulis.cost.step`). This job measures them with the
runtime's own step on ``N`` ranks, under the strategy that moves the most —
``N × (1,1,1)``, every rank holding the whole model, the least sharded pipelines of the cost
model's formula — with ZeRO-1 over all ranks (``dp_o = N``, the trainer's default optimizer
layout) and the trainer's default optimizer: a step plan that gives every pipeline no
micro-batch (:data:`REDUCTION_WARMUP` discarded steps, then :data:`REDUCTION_STEPS` timed ones;
medians of the slowest rank's figures).

The profile fits the cost model's bandwidth to it (:func:`hydraulis.cost.step.implied_reduce_gbps`).

**Communicators.** A step whose strategy needs a rank set no earlier step used creates its
process group then (the runtime's ``GroupCache``: ``torch.distributed.new_group``, a call on
every rank in the same order) and pays its first use (NCCL builds the communicator at the
first collective). The same job times that :data:`COMMUNICATOR_SAMPLES` times on pairs of ranks
— ``new_group``, one all-reduce on its members, the device synchronised — and keeps the median
of the slowest rank's times: the space's ``communicator_ms``, what synthesis charges per new
communicator (:mod:`hydraulis.dispatch.synthesis`). On the CPU (gloo on loopback) that is a
few milliseconds; the presets' 200 ms for GPUs is the order of an NCCL initialisation.
"""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.distributed as dist

from hydraulis.profiler.measurement import ReductionMeasurement
from hydraulis.job.config import RuntimeOptions
from hydraulis.runtime.launch import RankContext
from hydraulis.runtime.step import StepRunner
from hydraulis.job.strategy_spec import SpecGroup, strategy_layout
from hydraulis.types import BatchingMethod, ModelSpec, OptimizerLayout, PipelinePlan, Scheme, StepPlan, TimeCoefficients

REDUCTION_WARMUP = 3
"""Discarded steps (first use of the route and the optimizer's state)."""
REDUCTION_STEPS = 10
"""Timed steps."""
LEAST_SHARDED = Scheme(1, 1, 1)
COMMUNICATOR_SAMPLES = 5
"""Process groups created and used once, each timed apart."""


def measure_reduction(context: RankContext, model: ModelSpec, options: RuntimeOptions,
                      devices: int) -> ReductionMeasurement:
    """The module docstring's measurement on ``devices`` pipelines of one rank each."""
    layout = strategy_layout((SpecGroup(LEAST_SHARDED, devices),), model, lambda _: TimeCoefficients(0.0, 0.0, 0.0),
                             max_seq_len=1)
    runner = StepRunner(model, context, options, OptimizerLayout(context.world_size, 1, 1),
                        options.schedule(REDUCTION_WARMUP + REDUCTION_STEPS))
    idle = PipelinePlan(LEAST_SHARDED, 1, (), 0.0)
    plan = StepPlan(0, BatchingMethod.DISPATCH_BALANCED_PACKING, 0.0, 0.0, 0.0, (idle,) * devices)
    records = [runner.run(step, layout, plan, ()) for step in range(REDUCTION_WARMUP + REDUCTION_STEPS)]
    timed = records[REDUCTION_WARMUP:]
    return ReductionMeasurement(devices, float(np.median([r.step_ms for r in timed])),
                                float(np.median([r.propagate_ms for r in timed])),
                                float(np.median([r.reduce_ms for r in timed])),
                                tuple(r.step_ms for r in timed), measure_communicator_ms(context, devices))


def measure_communicator_ms(context: RankContext, devices: int) -> float:
    """The module docstring's communicator time on ranks ``0 … devices − 1`` (at least 2): the
    median over pairs ``(j, j + 1 mod devices)`` of the slowest rank's milliseconds for
    ``new_group`` and one all-reduce on it."""
    flag = torch.ones(1, device=context.device)
    samples = []
    for j in range(COMMUNICATOR_SAMPLES):
        ranks = sorted({j % devices, (j + 1) % devices})
        dist.barrier()
        started = time.perf_counter()
        group = dist.new_group(ranks)
        if context.rank in ranks:
            dist.all_reduce(flag, group=group)
        if context.device.type == "cuda":
            torch.cuda.synchronize(context.device)
        elapsed = torch.tensor([(time.perf_counter() - started) * 1e3], device=context.device)
        samples.append(float(context.world.all_reduce(elapsed, dist.ReduceOp.MAX).item()))
    return float(np.median(samples))

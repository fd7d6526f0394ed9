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

The details: :func:`measure_reduction`."""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.distributed as dist

from hydraulis.base.types import (
    BatchingMethod,
    ModelSpec,
    OptimizerLayout,
    PipelinePlan,
    Scheme,
    StepPlan,
    TimeCoefficients,
)
from hydraulis.job.config import RuntimeOptions
from hydraulis.job.strategy_spec import SpecGroup, strategy_layout
from hydraulis.profiler.measurement import ReductionMeasurement, overlap_share
from hydraulis.runtime.launch import RankContext
from hydraulis.runtime.step import StepRunner

REDUCTION_WARMUP = 3
"""Discarded steps (first use of the route and the optimizer's state)."""
REDUCTION_STEPS = 10
"""Timed steps."""
LEAST_SHARDED = Scheme(1, 1, 1)
COMMUNICATOR_SAMPLES = 5
"""Process groups created and used once, each timed apart."""
OVERLAP_SAMPLES = 5
"""Timed runs of each of the overlap's three measurements."""
OVERLAP_BYTES = 256 * 2**20
"""The most bytes per rank the overlap's exchange sends."""
OVERLAP_MATRIX = 512
"""The side of the overlap's square matrix products."""


def measure_reduction(context: RankContext, model: ModelSpec, options: RuntimeOptions,
                      devices: int) -> ReductionMeasurement:
    """:func:`measure_reduction`'s measurement on ``devices`` pipelines of one rank each.

    The profile fits the cost model's bandwidth to it (:func:`hydraulis.cost.step.implied_reduce_gbps`).

    **Communicators.** A step whose strategy needs a rank set no earlier step used creates its
    process group then (the runtime's ``GroupCache``: ``torch.distributed.new_group``, a call on
    every rank in the same order) and pays its first use (NCCL builds the communicator at the
    first collective). The same job times that :data:`COMMUNICATOR_SAMPLES` times on pairs of ranks
    — ``new_group``, one all-reduce on its members, the device synchronised — and keeps the median
    of the slowest rank's times: the space's ``communicator_ms``, what synthesis charges per new
    communicator (:mod:`hydraulis.dispatch.synthesis`). On the CPU (gloo on loopback) that is a
    few milliseconds; the presets' 200 ms for GPUs is the order of an NCCL initialisation.

    **Overlap.** The cost model hides a share ``ω`` of the reduction behind the backward (design
    §6.3). The job measures it: an all-to-all of the reduction's bytes per rank (the model's
    gradient in the ``grad_reduce_dtype``, at most :data:`OVERLAP_BYTES`) alone, ``t_e``; a chain of
    square matrix products in the compute dtype sized to last about as long, alone, ``t_c``; both
    together, the exchange issued asynchronously before the products, ``t_both`` — each the median
    over :data:`OVERLAP_SAMPLES` of the slowest rank's time — and
    ``ω = (t_e + t_c − t_both) / min(t_e, t_c)`` clipped to [0, 1]
    (:func:`~hydraulis.profiler.measurement.overlap_share`): the space's ``reduce_overlap``.
    """
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
                                tuple(r.step_ms for r in timed), measure_communicator_ms(context, devices),
                                measure_overlap(context, model.params, runner.reduce_dtype))


def measure_overlap(context: RankContext, elements: int, dtype: torch.dtype) -> float:
    """``ω`` of :func:`measure_reduction`: an exchange of ``elements`` values in ``dtype`` per rank
    against matrix products in the compute dtype, on every rank of ``context``."""
    world, device = context.world, context.device
    per = max(1, min(elements, OVERLAP_BYTES // dtype.itemsize) // world.size)
    outgoing, splits = torch.ones(per * world.size, dtype=dtype, device=device), [per] * world.size
    matrix = torch.randn(OVERLAP_MATRIX, OVERLAP_MATRIX, device=device).to(context.dtype)

    def products(count: int) -> None:
        for _ in range(count):
            torch.mm(matrix, matrix)

    def together(count: int) -> None:
        _, work = world.all_to_all_start(outgoing, splits, splits)
        products(count)
        work.wait()

    exchange_ms = _median_ms(context, lambda: world.all_to_all(outgoing, splits, splits))
    count = max(1, round(exchange_ms / max(_median_ms(context, lambda: products(1)), 1e-3)))
    return overlap_share(exchange_ms, _median_ms(context, lambda: products(count)),
                         _median_ms(context, lambda: together(count)))


def _median_ms(context: RankContext, run) -> float:
    """The median over :data:`OVERLAP_SAMPLES` of the slowest rank's milliseconds for ``run()``
    (the device synchronised), after one untimed run."""
    samples = []
    for sample in range(OVERLAP_SAMPLES + 1):
        dist.barrier()
        started = time.perf_counter()
        run()
        if context.device.type == "cuda":
            torch.cuda.synchronize(context.device)
        elapsed = torch.tensor([(time.perf_counter() - started) * 1e3], device=context.device)
        if sample:
            samples.append(float(context.world.all_reduce(elapsed, dist.ReduceOp.MAX).item()))
    return float(np.median(samples))


def measure_communicator_ms(context: RankContext, devices: int) -> float:
    """:func:`measure_reduction`'s communicator time on ranks ``0 … devices − 1`` (at least 2): the
    median over pairs ``(j, j + 1 mod devices)`` of the slowest rank's milliseconds for
    ``new_group`` and one all-reduce on it."""
    flag = torch.ones(1, device=context.device)
    samples = []
    for j in range(COMMUNICATOR_SAMPLES):
        ranks = sorted({j % devices, (j + 1) % devices})
        dist.barrier()
        started = time.perf_counter()
        group = context.new_group(ranks)
        if context.rank in ranks:
            dist.all_reduce(flag, group=group)
        if context.device.type == "cuda":
            torch.cuda.synchronize(context.device)
        elapsed = torch.tensor([(time.perf_counter() - started) * 1e3], device=context.device)
        samples.append(float(context.world.all_reduce(elapsed, dist.ReduceOp.MAX).item()))
    return float(np.median(samples))

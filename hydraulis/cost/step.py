"""A strategy's step time: the slowest pipeline plus the gradient reduction the backward cannot
hide (design §6.3, §9.4).

    T_step = max_p T_pipe(p) + X
    R      = max_p (g + 2)·P/(tp_p·pp_p) / (β·10⁶)   ms     (the full reduction, :func:`reduce_ms`)
    X_p    = (1 − ω)·max_σ (R_g,σ + R_w,σ) + ω·(max_σ E_g,σ + max_σ E_w,σ),   X = max_p X_p

``X`` (:func:`exposed_reduce_ms`) charges the share ``1 − ω`` of the exchange that does not
overlap compute in full, and of the rest only what the backward after a bucket cannot hide
(``E``). Worked example: LLaMA-7B (P ≈ 6.74e9), pipelines (1,8,1) and (1,4,1), β = 25 GB/s,
``g = 2``, ``t = 600`` ms, φ = 1/3, d = 0, ω = 0.9, B = 25 MiB: ``R ≈ 270`` ms,
``X = 0.1·270 + 0.9·2.1 ≈ 28.8`` ms.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hydraulis.base.errors import require, require_number
from hydraulis.base.types import OptimizerLayout, PipelineGroup, PipelineModel, Scheme
from hydraulis.sharding.buckets import BUCKET_MB, bucket_count, bucket_elements

WEIGHT_BYTES = 2
"""Bytes per weight propagated back (bf16)."""
GRADIENT_BYTES = 2
"""``g``, bytes per gradient sent, by default: bf16, the runtime's on CUDA."""


@dataclass(frozen=True)
class ReductionModel:
    """What prices a step's reduction (:func:`exposed_reduce_ms`): ``gbps`` ``β``, ``overlap``
    ``ω``, ``bucket_mb`` ``B`` (in MiB), the pipeline model's ``φ`` and ``d`` and ``gradient_bytes``
    ``g``."""

    gbps: float
    overlap: float = 0.0
    bucket_mb: float = BUCKET_MB
    pipeline_model: PipelineModel = PipelineModel()
    gradient_bytes: int = GRADIENT_BYTES

    def __post_init__(self) -> None:
        require_number(self.gbps, "reduce_gbps", minimum=0.0)
        require_number(self.overlap, "reduce_overlap", 0.0, 1.0)
        require(require_number(self.bucket_mb, "bucket_mb") > 0, "bucket_mb", self.bucket_mb, "must be > 0")
        require(self.gradient_bytes in (2, 4), "grad_reduce_bytes", self.gradient_bytes, "must be 2 or 4")


def reduce_ms(params: int, schemes: Sequence[Scheme], layout: OptimizerLayout, reduce_gbps: float,
              gradient_bytes: int = GRADIENT_BYTES) -> float:
    """``R`` for pipelines running ``schemes`` (one per pipeline).

    **Full reduction.** Gradients leave each pipeline's compute layout for the optimizer layout (a
    reduce-scatter of gradients of ``g`` bytes) and updated bf16 weights come back (an all-gather).
    ``g`` is the runtime's ``grad_reduce_dtype``
    (:meth:`~hydraulis.sharding.kinds.ReduceDtype.element_bytes`: 2 for bf16, the default on CUDA; 4
    for fp32, the default on the CPU), the space's ``grad_reduce_bytes``. A device of scheme
    ``(cp, tp, pp)`` holds ``P/(tp·pp)`` parameters, so it moves about ``(g + 2)·P/(tp·pp)`` bytes;
    over links of ``β`` GB/s per device, the least sharded pipeline decides:

        R = max_p (g + 2)·P/(tp_p·pp_p) / (β·10⁶)   ms                             (reduce_ms)

    A staged scheme (design §6.7) cuts its ``L`` layers unevenly: a device of stage ``σ`` holds
    ``P·(L_σ/L)/tp_σ`` parameters, so its sharding is ``min_σ tp_σ·L/L_σ`` (``tp·pp`` again for
    equal stages). One pipeline whose layout is the optimizer layout's (``dp_o = 1``) needs no
    reduction, and ``β = 0`` leaves the term out. Worked example: LLaMA-7B (P ≈ 6.74e9), pipelines
    (1,8,1) and (1,4,1), β = 25 GB/s = 2.5e7 bytes/ms: ``4·6.74e9/4 / 2.5e7 ≈ 270`` ms.
    """
    if reduce_gbps <= 0 or (len(schemes) == 1 and layout.dp == 1):
        return 0.0
    return reduction_bytes(params, schemes, gradient_bytes) / (reduce_gbps * 1e6)


def exposed_reduce_ms(params: int, pipelines: Sequence[PipelineGroup], layout: OptimizerLayout,
                      model: ReductionModel) -> float:
    """``X`` for ``pipelines`` (one entry per pipeline; a group stands for one pipeline of its
    scheme).

    **Exposed reduction** (:func:`exposed_reduce_ms`, the ``X`` every step time uses). The runtime
    sends a stage's gradients in buckets of ``B`` bytes, in reverse order of use, each as soon as
    the last micro-batch's backward has accumulated it, and brings the weights back per bucket, each
    waited for where the next forward needs it. Stage ``σ`` of a pipeline (its device's gradients
    ``R_g,σ = g·P/sh_σ/(β·10⁶)`` ms, weights ``R_w,σ = 2·P/sh_σ/(β·10⁶)``, ``n_σ`` buckets as the
    runtime cuts its ``P/sh_σ`` elements: :func:`hydraulis.sharding.buckets.bucket_count`, a first
    bucket of at most 1 MiB, then ``B`` each) runs a full micro-batch in ``t = c + b·S`` (``S`` its
    ``max_seq_len``, attention left out: the lightest full micro-batch), backward
    ``β_t = (1 − φ)·t``, forward ``φ·t``. The ``i``-th all-to-all carries bucket ``i`` of every
    stage, so it leaves when the first stage, which finishes its backward last, has produced it:
    at ``i·β_t/n`` into that stage's last backward; the link sends one bucket in ``R_g/n``, so the
    exchange ends ``max(R_g − β_t, 0) + min(R_g, β_t)/n`` after the pipeline's last backward.
    The weights of bucket ``i`` arrive at ``i·R_w/n`` and are needed at
    ``σ·(φ·t + d) + (i − 1)·φ·t/n`` (stage ``σ`` starts its first forward ``σ·(φ·t + d)`` late):

        E_g,σ = max(R_g,σ − β_t, 0) + min(R_g,σ, β_t)/n_σ
        E_w,σ = (max(R_w,σ − φ·t, 0) + min(R_w,σ, φ·t)/n_σ − σ·(φ·t + d))⁺
        X_p   = (1 − ω)·max_σ (R_g,σ + R_w,σ) + ω·(max_σ E_g,σ + max_σ E_w,σ)
        X     = max_p X_p

    ``ω`` is the share of an exchange that overlaps compute on the device (measured by the
    profiler's reduction job, the runtime's ``profiling.reduction``; a device preset's
    ``reduce_overlap`` for analytic spaces): ``ω = 0`` charges the full reduction ``R`` as before,
    ``ω = 1`` only what the backward that follows a bucket cannot hide. Worked example: the (1,4,1)
    pipeline of :func:`reduce_ms` (it decides) with ``g = 2``, ``t = 600`` ms, φ = 1/3, d = 0,
    ω = 0.9, B = 25 MiB: ``R_g = R_w = 135`` ms, ``n = 1 + ⌈(1.685e9 − 2^19)/(25·2^19)⌉ = 130``;
    ``β_t = 400 ≥ R_g`` so ``E_g = 135/130 ≈ 1.04`` ms, ``φ·t = 200 ≥ R_w`` so ``E_w ≈ 1.04`` ms;
    ``X = 0.1·270 + 0.9·2.1 ≈ 28.8`` ms instead of 270. In fp32 (``g = 4``) the same pipeline has
    ``R_g = 270`` ms in ``n = 259`` buckets: ``R = 405``, ``E_g = 270/259 ≈ 1.04``,
    ``E_w = 135/259 ≈ 0.52``, ``X = 0.1·405 + 0.9·1.57 ≈ 41.9`` ms.
    """
    if model.gbps <= 0 or (len(pipelines) == 1 and layout.dp == 1):
        return 0.0
    return max(_exposed_pipeline_ms(params, group, model) for group in pipelines)


def _exposed_pipeline_ms(params: int, group: PipelineGroup, model: ReductionModel) -> float:
    phi, d = model.pipeline_model.forward_fraction, model.pipeline_model.p2p_ms
    full = group.time.moments_ms(0.0, group.max_seq_len)
    backward, forward = (1.0 - phi) * full, phi * full
    totals, gradient, weights = [], [], []
    for stage, shard in enumerate(stage_shardings(group.scheme)):
        held = params / shard
        r_g = model.gradient_bytes * held / (model.gbps * 1e6)
        r_w = WEIGHT_BYTES * held / (model.gbps * 1e6)
        buckets = bucket_count(math.ceil(held), *bucket_elements(model.bucket_mb, model.gradient_bytes))
        totals.append(r_g + r_w)
        gradient.append(max(r_g - backward, 0.0) + min(r_g, backward) / buckets)
        weights.append(max(0.0, max(r_w - forward, 0.0) + min(r_w, forward) / buckets - stage * (forward + d)))
    return (1.0 - model.overlap) * max(totals) + model.overlap * (max(gradient) + max(weights))


def reduction_bytes(params: int, schemes: Sequence[Scheme], gradient_bytes: int = GRADIENT_BYTES) -> float:
    """``(g + 2)·P / min_p sharding(p)``: the bytes the least sharded pipeline's device moves."""
    return (gradient_bytes + WEIGHT_BYTES) * params / min(sharding(s) for s in schemes)


def implied_reduce_gbps(params: int, schemes: Sequence[Scheme], reduction_ms: float,
                        gradient_bytes: int = GRADIENT_BYTES) -> float:
    """The bandwidth ``β = (g + 2)·P / min_p sharding(p) / (R·10⁶)`` GB/s that a full reduction of
    ``reduction_ms`` under ``schemes`` implies: the inverse of :func:`reduce_ms`. E.g. the profiler's
    reduction under ``N × (1,1,1)`` of tiny (P = 315,968) in fp32 (``g = 4``) in 8 ms:
    ``1,895,808 / 8e6 ≈ 0.237`` GB/s."""
    require(reduction_ms > 0, "reduction_ms", reduction_ms, "must be > 0")
    return reduction_bytes(params, schemes, gradient_bytes) / (reduction_ms * 1e6)


def sharding(scheme: Scheme) -> float:
    """Into how many parts the most loaded device's share cuts the parameters: ``tp·pp``, or
    ``min_σ tp_σ·L/L_σ`` for a staged scheme (e.g. ``1|4:20>2:12``: min(4·32/20, 2·32/12) = 5.33)."""
    return min(stage_shardings(scheme))


def stage_shardings(scheme: Scheme) -> tuple[float, ...]:
    """``sh_σ`` of every stage: ``tp·pp`` for each of ``pp`` equal stages, ``tp_σ·L/L_σ`` for a staged scheme."""
    if not scheme.stages:
        return (float(scheme.tp * scheme.pp),) * scheme.pp
    layers = sum(stage.layers for stage in scheme.stages)
    return tuple(stage.tp * layers / stage.layers for stage in scheme.stages)


def step_time_ms(pipeline_ms: Iterable[float], reduction_ms: float) -> float:
    """``max_p T_pipe(p) + X``."""
    return max(pipeline_ms) + reduction_ms


def reduction_model(source) -> ReductionModel:
    """The reduction model of a scheme space or a proposal: its ``reduce_gbps``, ``reduce_overlap``,
    ``pipeline_model`` and ``grad_reduce_bytes``, the runtime's default bucket."""
    return ReductionModel(source.reduce_gbps, source.reduce_overlap, pipeline_model=source.pipeline_model,
                          gradient_bytes=source.grad_reduce_bytes)

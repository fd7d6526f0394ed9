"""A strategy's step time: the slowest pipeline plus the gradient reduction (design §4).

    T_step = max_p T_pipe(p) + T_reduce

Gradients leave each pipeline's compute layout for the optimizer layout (a reduce-scatter of
bf16 gradients) and updated bf16 weights come back (an all-gather). A device of scheme
``(cp, tp, pp)`` holds ``P/(tp·pp)`` parameters, so it moves about ``2·2·P/(tp·pp)`` bytes; over
links of ``β`` GB/s per device, the least sharded pipeline decides:

    T_reduce = max_p 4·P/(tp_p·pp_p) / (β·10⁶)   ms

A staged scheme (design §18) cuts its ``L`` layers unevenly: a device of stage ``σ`` holds
``P·(L_σ/L)/tp_σ`` parameters, so its sharding is ``min_σ tp_σ·L/L_σ`` (``tp·pp`` again for equal
stages). One pipeline whose layout is the optimizer layout's (``dp_o = 1``) needs no reduction, and
``β = 0`` leaves the term out. Worked example: LLaMA-7B (P ≈ 6.74e9), pipelines (1,8,1) and
(1,4,1), β = 25 GB/s = 2.5e7 bytes/ms: ``4·6.74e9/4 / 2.5e7 ≈ 270`` ms.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from hydraulis.errors import require
from hydraulis.types import OptimizerLayout, Scheme


def reduce_ms(params: int, schemes: Sequence[Scheme], layout: OptimizerLayout, reduce_gbps: float) -> float:
    """``T_reduce`` of the module docstring for pipelines running ``schemes`` (one per pipeline)."""
    if reduce_gbps <= 0 or (len(schemes) == 1 and layout.dp == 1):
        return 0.0
    return reduction_bytes(params, schemes) / (reduce_gbps * 1e6)


def reduction_bytes(params: int, schemes: Sequence[Scheme]) -> float:
    """``4·P / min_p sharding(p)``: the bytes the least sharded pipeline's device moves."""
    return 4.0 * params / min(sharding(s) for s in schemes)


def implied_reduce_gbps(params: int, schemes: Sequence[Scheme], reduction_ms: float) -> float:
    """The bandwidth ``β = 4·P / min_p sharding(p) / (T_reduce·10⁶)`` GB/s that a reduction of
    ``reduction_ms`` under ``schemes`` implies: the inverse of :func:`reduce_ms`. E.g. the profiler's
    reduction under ``N × (1,1,1)`` of tiny (P = 315,968) in 8 ms: ``1,263,872 / 8e6 ≈ 0.158`` GB/s."""
    require(reduction_ms > 0, "reduction_ms", reduction_ms, "must be > 0")
    return reduction_bytes(params, schemes) / (reduction_ms * 1e6)


def sharding(scheme: Scheme) -> float:
    """Into how many parts the most loaded device's share cuts the parameters: ``tp·pp``, or
    ``min_σ tp_σ·L/L_σ`` for a staged scheme (e.g. ``1|4:20>2:12``: min(4·32/20, 2·32/12) = 5.33)."""
    if not scheme.stages:
        return scheme.tp * scheme.pp
    layers = sum(stage.layers for stage in scheme.stages)
    return min(stage.tp * layers / stage.layers for stage in scheme.stages)


def step_time_ms(pipeline_ms: Iterable[float], reduction_ms: float) -> float:
    """``max_p T_pipe(p) + T_reduce``."""
    return max(pipeline_ms) + reduction_ms

"""The global gradient norm, computed once per step in the optimizer layout, and clipping by it.

After the reduction (:mod:`.routes`) every element of every parameter's gradient sits in exactly
one owner's buffer (:mod:`hydraulis.sharding.ownership`), whatever strategy computed
it: pipelines, cp ranks and micro-batches summed, the tensor-parallel replicas of the norm
weights counted once (only tp rank 0's copy is reduced). So, with ``g_r`` rank ``r``'s buffer
(empty on a rank that owns nothing)::

    ‖g‖ = √( Σ_r ‖g_r‖² )                       one all-reduce of one number

— ``torch.nn.utils.clip_grad_norm_``'s total norm of one process, up to fp32 rounding. Clipping
at ``c`` scales every element by ``min(1, c / (‖g‖ + 1e-6))``, ``clip_grad_norm_``'s coefficient.
An inf or NaN anywhere makes the all-reduced norm non-finite on every rank alike, so every rank
skips the update together (:meth:`~.master.OptimizerShard.step`).

Worked example: two owners with ``‖g_0‖ = 3`` and ``‖g_1‖ = 4``: ``‖g‖ = 5``; clipping at 1.0 scales
every element by ``1 / (5 + 1e-6) ≈ 0.2``, so the clipped gradient's norm is 1.
"""

from __future__ import annotations

import torch

from hydraulis.runtime.parallel.group import ParallelGroup

CLIP_EPS = 1e-6
"""Added to the norm in the clipping coefficient (as ``clip_grad_norm_`` does)."""


def global_grad_norm(grad: torch.Tensor, world: ParallelGroup) -> torch.Tensor:
    """``‖g‖`` of the module docstring from this rank's reduced gradient buffer ``grad`` (every
    rank calls it); a 0-d float64 tensor on ``grad``'s device, equal on every rank (the squares
    are summed in float64, so no finite fp32 norm overflows)."""
    squared = torch.linalg.vector_norm(grad).double().square().reshape(1)
    return world.all_reduce(squared).sqrt().reshape(())


def clip_coefficient(norm: float, max_norm: float) -> float:
    """The factor every element is scaled by: ``min(1, c / (‖g‖ + 1e-6))``."""
    return min(1.0, max_norm / (norm + CLIP_EPS))

"""A block's entry into the tensor-parallel region and its column-parallel linears, as one
autograd function whose backward hides the input gradient's reduction behind the weight
gradients (Megatron-LM's ``LinearWithGradAccumulationAndAsyncCommunication``, Narayanan et al.
2021).

A block's column layers (Q, K, V of attention; gate and up of the MLP; the output head alone)
share one entry ``X̂ = enter(X)`` — the identity, or under sequence parallelism the all-gather
of every tp rank's rows (:mod:`.sequence`) — and compute ``Y_i = X̂·W_iᵀ`` with their weight
shards ``W_i``. Given the gradients ``G_i = ∂L/∂Y_i``, the backward needs::

    P      = Σ_i G_i·W_i            this rank's partial input gradient (its shards' share)
    ∂L/∂X  = all-reduce(P)          (sequence parallelism: reduce-scatter(P), this rank's rows)
    ∂L/∂W_i = G_iᵀ·X̂                the weight gradients, which need neither

The details: :func:`column_parallel`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from hydraulis.runtime.parallel.group import ParallelGroup, finished


def start_input_reduction(partial: torch.Tensor, group: ParallelGroup,
                          sequence_parallel: bool) -> tuple[torch.Tensor, Any]:
    """The entry's adjoint on the partial input gradient ``P``, started: all-reduce, or under
    sequence parallelism reduce-scatter (:meth:`~.group.ParallelGroup.all_reduce_start`)."""
    return group.reduce_scatter_start(partial) if sequence_parallel else group.all_reduce_start(partial)


class _ColumnParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, group: ParallelGroup, sequence_parallel: bool,
                *weights: torch.Tensor) -> tuple[torch.Tensor, ...]:
        entered = group.all_gather(x) if sequence_parallel else x
        ctx.save_for_backward(entered, *weights)
        ctx.group, ctx.sequence_parallel = group, sequence_parallel
        return tuple(F.linear(entered, weight) for weight in weights)

    @staticmethod
    def backward(ctx, *grads: torch.Tensor):
        entered, *weights = ctx.saved_tensors
        rows = entered.reshape(-1, entered.shape[-1])
        grads = [grad.reshape(-1, grad.shape[-1]) for grad in grads]
        partial = grads[0] @ weights[0]
        for grad, weight in zip(grads[1:], weights[1:]):
            partial.addmm_(grad, weight)
        reduced, work = start_input_reduction(partial.view(entered.shape), ctx.group, ctx.sequence_parallel)
        weight_grads = tuple(grad.t() @ rows for grad in grads)
        return finished(reduced, work), None, None, *weight_grads


class _FusedColumnParallel(torch.autograd.Function):
    """:class:`_ColumnParallel` of weights in consecutive rows of one storage: one product
    ``X̂·[W_1; …; W_n]ᵀ`` forward, ``P = G·[W_1; …; W_n]`` and ``Gᵀ·X̂`` backward (:func:`column_parallel`)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group: ParallelGroup, sequence_parallel: bool,
                *weights: torch.Tensor) -> torch.Tensor:
        entered = group.all_gather(x) if sequence_parallel else x
        ctx.save_for_backward(entered, *weights)
        ctx.group, ctx.sequence_parallel = group, sequence_parallel
        return F.linear(entered, _stacked(weights))

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        entered, *weights = ctx.saved_tensors
        rows, grad = entered.reshape(-1, entered.shape[-1]), grad.reshape(-1, grad.shape[-1])
        partial = grad @ _stacked(weights)
        reduced, work = start_input_reduction(partial.view(entered.shape), ctx.group, ctx.sequence_parallel)
        weight_grads = (grad.t() @ rows).split([weight.shape[0] for weight in weights])
        return finished(reduced, work), None, None, *weight_grads


class _FusedColumns(torch.autograd.Function):
    """``X·[W_1; …; W_n]ᵀ`` of weights in consecutive rows of one storage (:func:`column_parallel`)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, *weights: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, *weights)
        return F.linear(x, _stacked(weights))

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, *weights = ctx.saved_tensors
        rows, grad = x.reshape(-1, x.shape[-1]), grad.reshape(-1, grad.shape[-1])
        weight_grads = (grad.t() @ rows).split([weight.shape[0] for weight in weights])
        return (grad @ _stacked(weights)).view(x.shape), *weight_grads


def _stacked(weights: Sequence[torch.Tensor]) -> torch.Tensor:
    """The weights as one ``[Σ rows, in]`` matrix over their common storage."""
    return weights[0].as_strided((sum(w.shape[0] for w in weights), weights[0].shape[1]), weights[0].stride())


def stacked_rows(weights: Sequence[torch.Tensor]) -> bool:
    """Whether ``weights`` are consecutive rows of one storage (contiguous, one dtype)."""
    first = weights[0]
    offset = first.storage_offset()
    for weight in weights:
        if not (weight.is_contiguous() and weight.dtype == first.dtype and weight.shape[1:] == first.shape[1:]
                and weight.untyped_storage().data_ptr() == first.untyped_storage().data_ptr()
                and weight.storage_offset() == offset):
            return False
        offset += weight.numel()
    return True


def column_parallel(x: torch.Tensor, weights: Sequence[torch.Tensor], group: ParallelGroup,
                    sequence_parallel: bool) -> tuple[torch.Tensor, ...]:
    """``enter(x)·W_iᵀ`` for every weight shard ``W_i`` of a block (:func:`column_parallel`): ``x`` this
    rank's rows of the residual stream, every output all ``T`` rows of its shard's columns.
    Without a tensor-parallel group there is nothing to reduce: plain linears, or one fused product
    when the weights share a storage (with a group too).

    so it computes ``P``, **starts** its collective (``async_op``), computes the weight gradients
    while the collective runs, and only then waits. Separate autograd nodes would run the weight
    gradients inside each linear's backward, before the entry's collective could begin, and leave
    the collective exposed. On CUDA the collective runs on the communicator's stream beside the
    weight-gradient products on the compute stream; with gloo on the CPU, on gloo's thread.

    Worked example, tp = 2, attention with ``H = 4``, one query head and one kv head of ``d = 2``
    per rank, ``T = 4`` tokens: each rank holds ``W_q, W_k, W_v`` of ``2 × 4``, ``P = G_q·W_q +
    G_k·W_k + G_v·W_v`` is ``4 × 4``; its all-reduce (16 values) runs while the rank computes the
    three ``2 × 4`` weight gradients from ``G_i`` (``4 × 2``) and ``X̂`` (``4 × 4``). Under sequence
    parallelism rank 0 holds tokens 0–1 and rank 1 tokens 2–3, ``X̂`` is all 4 tokens on both, and
    the reduce-scatter returns each rank its 2 rows of ``P_0 + P_1``.

    What the function keeps for the backward is what the separate linears kept: ``X̂`` (the
    gathered rows under sequence parallelism) and the weights.

    **Fused projections.** A block's column weights live in one storage, consecutive rows
    (:meth:`~hydraulis.runtime.model.decoder.StageModel.fuse_storage`: ``[W_q; W_k; W_v]`` and
    ``[W_gate; W_up]``, each still its own parameter of its own shape, sharded, propagated, imported
    and exported as before). Without a tensor-parallel group they then run as one matrix product
    ``Y = X·[W_1; …; W_n]ᵀ`` split by columns, and its backward is two products, ``∂L/∂X = G·W``
    and ``∂L/∂W = Gᵀ·X`` split by rows — one launch where there were ``n`` (forward) and ``2n``
    (backward). Under tensor parallelism the same holds of each rank's shards (its rows of every
    weight, stacked in the same order: the columns of ``Y`` each rank computes are the separate
    products' columns, concatenated), with ``P = G·[W_1; …; W_n]`` reduced as above. Weights
    that do not share a storage so run one product each.
    """
    fused = len(weights) > 1 and stacked_rows(weights)
    if fused:
        outputs = (_FusedColumns.apply(x, *weights) if group.trivial
                   else _FusedColumnParallel.apply(x, group, sequence_parallel, *weights))
        return outputs.split([w.shape[0] for w in weights], dim=-1)
    if group.trivial:
        return tuple(F.linear(x, weight) for weight in weights)
    return _ColumnParallel.apply(x, group, sequence_parallel, *weights)

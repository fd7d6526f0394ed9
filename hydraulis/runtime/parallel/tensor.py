"""Tensor parallelism (Shoeybi et al. 2019, Megatron-LM): column/row-parallel linears,
vocabulary-parallel embedding and cross-entropy.

Two conjugate operators move activations in and out of the tensor-parallel region:

* ``f``: forward identity, backward all-reduce (sum of the partial input gradients of the
  ranks' column shards) — fused with the block's column linears, the all-reduce overlapping
  their weight gradients (:mod:`.columns`);
* ``g = reduce_from_group``: forward all-reduce (sum of the partial outputs of the ranks' row
  shards), backward identity.

An MLP ``Y = down(silu(X·Gᵀ) ⊙ X·Uᵀ)`` becomes ``g(down_r(silu(f(X)·G_rᵀ) ⊙ f(X)·U_rᵀ))`` with
``G, U`` split by rows (column-parallel: each rank computes its block of the hidden units) and
``down`` split by columns (row-parallel: each rank a partial sum of the output). Attention is
split the same way by heads. Per block: one all-reduce forward, one backward.

The vocabulary is split by rows of the embedding and of the output head (``V/tp`` tokens per
rank). Cross-entropy never gathers the logits: with ``m`` the all-reduced max, the loss of a
token with label ``y`` is ``log Σ_r Σ_{v∈r} exp(z_v − m) − (z_y − m)``, two sums all-reduced
over the group in one all-reduce of the two stacked, after the all-reduce of the max that both
need: two collectives per micro-batch. Its gradient on rank r is ``softmax(z)_v − [v = y]`` for
the rank's ``v``.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from hydraulis.runtime.parallel.columns import column_parallel
from hydraulis.runtime.parallel.group import ParallelGroup, conjugate
from hydraulis.runtime.parallel.sequence import scatter_sequence
from hydraulis.sharding.parameters import unit_range

IGNORE_INDEX = -100
"""Label of a position without loss (padding)."""


def reduce_from_group(x: torch.Tensor, group: ParallelGroup) -> torch.Tensor:
    """``g``: all-reduce forward, identity backward."""
    return x if group.trivial else conjugate(x, lambda t: group.all_reduce(t.clone()), lambda g: g)


class ColumnParallelLinear(nn.Module):
    """``Y_r = f(X)·W_rᵀ`` with ``W`` split by output rows, entering the tensor-parallel region
    itself (:func:`~hydraulis.runtime.parallel.columns.column_parallel`). The column layers of a
    block share one entry: their module runs them together, through their ``weight``, without
    calling them."""

    def __init__(self, in_features: int, local_out_features: int, group: ParallelGroup,
                 sequence_parallel: bool = False, **factory) -> None:
        super().__init__()
        self.group, self.sequence_parallel = group, sequence_parallel
        self.weight = nn.Parameter(torch.empty(local_out_features, in_features, **factory))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return column_parallel(x, (self.weight,), self.group, self.sequence_parallel)[0]


def leave_group(x: torch.Tensor, group: ParallelGroup, sequence_parallel: bool) -> torch.Tensor:
    """The sum over the group of the partial results ``x``: ``g`` (all-reduce), or under sequence
    parallelism this rank's rows of it (:func:`~hydraulis.runtime.parallel.sequence.scatter_sequence`)."""
    return scatter_sequence(x, group) if sequence_parallel else reduce_from_group(x, group)


class RowParallelLinear(nn.Module):
    """``Y = Σ_r X_r·W_rᵀ`` with ``W`` split by input columns; the sum is :func:`leave_group`."""

    def __init__(self, local_in_features: int, out_features: int, group: ParallelGroup,
                 sequence_parallel: bool = False, **factory) -> None:
        super().__init__()
        self.group, self.sequence_parallel = group, sequence_parallel
        self.weight = nn.Parameter(torch.empty(out_features, local_in_features, **factory))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return leave_group(F.linear(x, self.weight), self.group, self.sequence_parallel)


class VocabParallelEmbedding(nn.Module):
    """Rows ``[start, start + V/tp)`` of the embedding; tokens outside give zeros, the sum over
    ranks (:func:`leave_group`) is the full lookup."""

    def __init__(self, vocab: int, hidden: int, group: ParallelGroup, sequence_parallel: bool = False,
                 **factory) -> None:
        super().__init__()
        self.group, self.sequence_parallel = group, sequence_parallel
        first, count = unit_range(vocab, group.size, group.rank)
        self.start, self.stop = first, first + count
        self.weight = nn.Parameter(torch.empty(count, hidden, **factory))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        outside = (ids < self.start) | (ids >= self.stop)
        local = (ids - self.start).masked_fill(outside, 0)
        out = F.embedding(local, self.weight).masked_fill(outside.unsqueeze(-1), 0.0)
        return leave_group(out, self.group, self.sequence_parallel)


class _VocabParallelCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: torch.Tensor, labels: torch.Tensor, group: ParallelGroup, start: int) -> torch.Tensor:
        z = logits.to(torch.promote_types(logits.dtype, torch.float32))
        maximum = group.all_reduce(z.max(dim=-1).values, dist.ReduceOp.MAX)
        shifted = z - maximum.unsqueeze(-1)
        valid = labels != IGNORE_INDEX
        local = labels - start
        inside = valid & (local >= 0) & (local < z.shape[-1])
        index = local.clamp(0, z.shape[-1] - 1).unsqueeze(-1)
        exp = shifted.exp()
        target, total = group.all_reduce(torch.stack((shifted.gather(-1, index).squeeze(-1) * inside,
                                                      exp.sum(dim=-1))))
        loss = (total.log() - target) * valid
        ctx.save_for_backward(exp / total.unsqueeze(-1), index, inside, valid)
        ctx.dtype = logits.dtype
        return loss

    @staticmethod
    def backward(ctx, grad_loss: torch.Tensor):
        softmax, index, inside, valid = ctx.saved_tensors
        grad = softmax.scatter_add(-1, index, -inside.to(softmax.dtype).unsqueeze(-1))
        grad = grad * (grad_loss * valid).unsqueeze(-1)
        return grad.to(ctx.dtype), None, None, None


def vocab_parallel_cross_entropy(logits: torch.Tensor, labels: torch.Tensor, group: ParallelGroup,
                                 start: int) -> torch.Tensor:
    """Per-token loss (fp32 or wider, 0 where ``labels == IGNORE_INDEX``) from this rank's logits of the
    vocabulary rows ``[start, start + logits.shape[-1])``."""
    return _VocabParallelCrossEntropy.apply(logits, labels, group, start)

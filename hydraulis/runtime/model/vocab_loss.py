"""The loss over the vocabulary in chunks of ``C`` tokens, never ``[T × V']`` logits in fp32.

With ``x`` the final norm's rows, ``W`` this tp rank's ``V' × H`` head rows, ``z = x·Wᵀ`` and
``G = softmax(z) − onehot(y)`` (zero rows without a label; the max and sums all-reduced over tp as
in :mod:`hydraulis.runtime.parallel.tensor`), the loss ``L = Σ_t ℓ_t`` has ``∂L/∂x = s·G·W`` and
``∂L/∂W = s·Gᵀ·x`` for the upstream scalar ``s``. The forward computes both chunk by chunk and
keeps ``G·W`` (``b·H`` per token) and ``Gᵀ·x`` summed in fp32 (``4·V'·H``); the backward scales
them by ``s`` in place. Same matrix products as unchunked, so no extra arithmetic; the loss is
returned summed, which is what makes the backward a scaling (every caller sums, :mod:`.loss`).

A chunk's working set is ``(4 + b)·C·V'`` or, below fp32, ``b·(H + C)·V'`` if larger
(:mod:`hydraulis.sharding.activations`). Worked example, Llama-1B (``V = 128,256``, ``H = 2048``),
bf16, ``T = 4096``, ``C = 1024``: 0.79 GB per chunk and 1.07 GB kept, against 7.4 GB of
working set and 2.1 GB of kept fp32 softmax all at once.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from hydraulis.runtime.parallel.group import ParallelGroup, conjugate
from hydraulis.runtime.parallel.tensor import IGNORE_INDEX


class VocabLoss(nn.Module):
    """``Σ_t ℓ_t`` of the rows ``x`` against ``labels`` through ``head`` (the last stage's
    column-parallel head, run without calling it: ``fused_children``), ``chunk`` rows at a time.
    ``x`` is this rank's rows of the residual stream: under sequence parallelism the head enters
    the tensor-parallel region by all-gathering them (backward: reduce-scatter), else by the
    identity (backward: all-reduce of the partial input gradients ``G·W``)."""

    def __init__(self, head: nn.Module, group: ParallelGroup, sequence_parallel: bool, vocab_start: int,
                 chunk: int) -> None:
        super().__init__()
        self.fused_children = (head,)
        self.group, self.sequence_parallel = group, sequence_parallel
        self.vocab_start, self.chunk = vocab_start, chunk

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        group = self.group
        if not group.trivial:
            x = (conjugate(x, group.all_gather, group.reduce_scatter) if self.sequence_parallel
                 else conjugate(x, lambda t: t, lambda g: group.all_reduce(g.contiguous())))
        return _ChunkedVocabLoss.apply(x, self.fused_children[0].weight, labels, group, self.vocab_start, self.chunk)


class _ChunkedVocabLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor, group: ParallelGroup,
                start: int, chunk: int) -> torch.Tensor:
        wide = torch.promote_types(x.dtype, torch.float32)
        grad_x = torch.empty_like(x)
        grad_weight = torch.zeros(weight.shape, dtype=wide, device=weight.device)
        loss = torch.zeros((), dtype=wide, device=x.device)
        for first in range(0, x.shape[0], chunk):
            rows = x[first:first + chunk]
            part_loss, grad_logits = _chunk(rows, weight, labels[first:first + chunk], group, start)
            loss += part_loss
            torch.matmul(grad_logits, weight, out=grad_x[first:first + chunk])
            if grad_weight.dtype == grad_logits.dtype:
                grad_weight.addmm_(grad_logits.t(), rows)
            else:
                grad_weight.add_(grad_logits.t() @ rows)
            del grad_logits
        ctx.save_for_backward(grad_x, grad_weight)
        ctx.weight_dtype = weight.dtype
        return loss

    @staticmethod
    def backward(ctx, grad_loss: torch.Tensor):
        grad_x, grad_weight = ctx.saved_tensors
        return (grad_x.mul_(grad_loss.to(grad_x.dtype)), grad_weight.mul_(grad_loss).to(ctx.weight_dtype),
                None, None, None, None)


def _chunk(rows: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor, group: ParallelGroup,
           start: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One chunk's summed loss and ``G`` in the compute dtype (module docstring), its fp32
    temporaries reused in place."""
    z = (rows @ weight.t()).to(torch.promote_types(rows.dtype, torch.float32))
    maximum = group.all_reduce(z.max(dim=-1).values, dist.ReduceOp.MAX)
    z.sub_(maximum.unsqueeze(-1))
    valid = labels != IGNORE_INDEX
    local = labels - start
    inside = valid & (local >= 0) & (local < z.shape[-1])
    index = local.clamp(0, z.shape[-1] - 1).unsqueeze(-1)
    target = z.gather(-1, index).squeeze(-1) * inside
    softmax = z.exp_()
    target, total = group.all_reduce(torch.stack((target, softmax.sum(dim=-1))))
    loss = ((total.log() - target) * valid).sum()
    softmax.div_(total.unsqueeze(-1))
    softmax.scatter_add_(-1, index, -inside.to(softmax.dtype).unsqueeze(-1))
    softmax.mul_(valid.unsqueeze(-1))
    return loss, softmax.to(rows.dtype)

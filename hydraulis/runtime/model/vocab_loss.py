"""The loss over the vocabulary in chunks of tokens: the output head and the cross-entropy of a
micro-batch without its ``[T × V]`` logits in fp32.

With ``x`` the final norm's ``T`` rows, ``W`` this tp rank's ``V' × H`` rows of the head and
``y_t`` the labels, the loss is ``Σ_t ℓ_t``, ``ℓ_t = log Σ_v exp(z_tv) − z_{t,y_t}``,
``z = x·Wᵀ`` (the vocabulary-parallel form of :mod:`hydraulis.runtime.parallel.tensor`: the
max and the two sums all-reduced over the tp group). Its gradients are::

    G = softmax(z) − onehot(y)      (zero rows where y_t has no label)
    ∂L/∂x = s·G·W,   ∂L/∂W = s·Gᵀ·x,   s = ∂(objective)/∂L (a scalar)

All of them are computed in the **forward**, ``C`` rows at a time (:class:`VocabLoss`): each
chunk's logits, their fp32 softmax and ``G`` live only while the chunk runs; the forward keeps
``G·W`` (``b·H`` bytes per token, the size of the head's input that the unchunked head keeps)
and ``Gᵀ·x`` summed over the chunks in fp32 (``4·V'·H`` bytes), and the backward only scales
them by ``s``. The matrix products are those of the unchunked forward and backward, so the
chunking costs no arithmetic. The loss is returned summed (a scalar), which is what makes the
backward a scaling: every caller sums the token losses (:mod:`.loss`).

Memory per micro-batch on the last stage, ``b`` the compute dtype's bytes: the working set of
one chunk ``C·(2b + 8)·V'`` (logits, fp32 shifted logits, their exponentials reused for ``G``,
``G`` in the compute dtype) instead of ``T·(b + 12)·V'``, and ``T·b·H + 4·V'·H`` kept instead
of ``T·(4·V' + 10)`` (:mod:`hydraulis.layout.activations`). Worked example, Llama-1B
(``V = 128,256``, ``H = 2048``), bf16, ``T = 4096``, ``C = 1024``: a chunk's working set
1.57 GB and 1.07 GB kept, against 6.3 GB of fp32 logits' working set and 2.1 GB of kept softmax.
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
            grad_weight.add_(grad_logits.t() @ rows)
        ctx.save_for_backward(grad_x, grad_weight)
        ctx.weight_dtype = weight.dtype
        return loss

    @staticmethod
    def backward(ctx, grad_loss: torch.Tensor):
        grad_x, grad_weight = ctx.saved_tensors
        return ((grad_x * grad_loss.to(grad_x.dtype)), (grad_weight * grad_loss).to(ctx.weight_dtype),
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

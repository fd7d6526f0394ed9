"""Expert parallelism: a mixture of experts' routed copies sent to the ranks holding their
experts and their outputs brought back, by all-to-all with variable splits (Lepikhin et al.
2021, GShard; dropless, as Megablocks and Megatron-Core's token dispatcher).

``P`` ranks of an expert-parallel group, ``L = E/P`` experts each (rank ``q`` holds experts
``q·L … (q+1)·L − 1``). A rank's copies come sorted by expert, ``c_i`` of them for expert ``i``:

    dispatch:  rank → q the copies of q's experts, ``Σ_{i ∈ q} c_i`` rows (counts exchanged first,
               one all-to-all of ``L`` numbers per pair), received source-major, then reordered
               expert-major so each local expert's rows are consecutive;
    combine:   the inverse reordering and the inverse all-to-all, rows back in the sent order.

The backward of each all-to-all is the all-to-all with the splits swapped. Worked example,
``P = 2``, ``E = 4``: rank 0 holds experts 0, 1 and sends ``c = (2, 1, 0, 3)``: 3 rows to itself,
3 to rank 1; rank 1 sends ``(1, 0, 2, 2)``: 1 row to rank 0, 4 to itself; rank 0 computes
expert 0 on 3 rows, expert 1 on 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from hydraulis.runtime.parallel.group import ParallelGroup


class _AllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, group: ParallelGroup, output_splits: list[int], input_splits: list[int]):
        ctx.group, ctx.splits = group, (output_splits, input_splits)
        return group.all_to_all(x, output_splits, input_splits)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        output_splits, input_splits = ctx.splits
        return ctx.group.all_to_all(grad.contiguous(), input_splits, output_splits), None, None, None


@dataclass(frozen=True)
class Dispatched:
    """Rows received for this rank's experts, expert-major, with what :func:`combine` needs."""

    rows: torch.Tensor
    local_counts: torch.Tensor
    order: torch.Tensor
    sent: list[int]
    received: list[int]


def dispatch(copies: torch.Tensor, counts: torch.Tensor, group: ParallelGroup) -> Dispatched:
    """Send ``copies`` (sorted by expert, ``counts[i]`` for expert ``i``) to their experts' ranks."""
    ranks = group.size
    local = counts.numel() // ranks
    incoming = group.all_to_all(counts.contiguous(), [local] * ranks, [local] * ranks).view(ranks, local)
    sent = counts.view(ranks, local).sum(dim=1).tolist()
    received = incoming.sum(dim=1).tolist()
    rows = _AllToAll.apply(copies, group, received, sent)
    experts = torch.arange(local, device=counts.device).repeat(ranks).repeat_interleave(incoming.reshape(-1))
    order = torch.argsort(experts, stable=True)
    return Dispatched(rows[order], incoming.sum(dim=0), order, sent, received)


def combine(outputs: torch.Tensor, dispatched: Dispatched, group: ParallelGroup) -> torch.Tensor:
    """The outputs of :func:`dispatch`'s rows, back on the ranks and in the order they were sent from."""
    source_major = torch.empty_like(outputs).index_copy(0, dispatched.order, outputs)
    return _AllToAll.apply(source_major, group, dispatched.sent, dispatched.received)

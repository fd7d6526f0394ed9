"""Sequence parallelism (Korthikanti et al. 2022, Megatron-LM): outside the tensor-parallel
regions, the tp ranks split the tokens instead of repeating them.

Without it every tp rank holds the whole residual stream ``x: [T, H]`` between the blocks and
runs the norms on all ``T`` tokens; a block is entered with ``f`` (identity forward, all-reduce
backward) and left with ``g`` (all-reduce forward). With it tp rank ``r`` holds rows
``[r·T/tp, (r+1)·T/tp)`` of ``x`` (``T`` a multiple of ``tp``, see
:func:`~hydraulis.runtime.model.packing.pack_micro_batch`) and the two conjugates become::

    enter:                     all-gather of the rows forward,   reduce-scatter backward
    leave = scatter_sequence:  reduce-scatter of the sum forward, all-gather backward

(the entry fused with the block's column-parallel linears, :mod:`.columns`).

The details: :func:`scatter_sequence`."""

from __future__ import annotations

import torch

from hydraulis.runtime.parallel.group import ParallelGroup, conjugate


def scatter_sequence(x: torch.Tensor, group: ParallelGroup) -> torch.Tensor:
    """This rank's rows of the sum over tp ranks of ``x``; backward: all-gather of the gradient.

    An all-reduce is a reduce-scatter followed by an all-gather, so a layer moves the same bytes as
    without sequence parallelism, but the norms, the residual additions, the dropout-free glue
    between blocks and the activations they keep shrink by ``tp``. Worked example, tp = 2, T = 6:
    rank 0 holds tokens 0–2, rank 1 tokens 3–5; entering attention both gather all 6 tokens, the
    row-parallel output projection's partial sums are reduce-scattered back to 3 tokens each.

    The vocabulary-parallel embedding leaves with ``scatter_sequence`` as well; the output head
    enters with the all-gather, so the loss is computed on all ``T`` tokens by every tp rank as
    without sequence parallelism. The norm weights then receive a different partial gradient on
    every tp rank (each from its own tokens), so all tp ranks contribute them to the reduction
    (:attr:`~hydraulis.sharding.parameters.Shard.contributes`).
    """
    return x if group.trivial else conjugate(x, group.reduce_scatter, group.all_gather)

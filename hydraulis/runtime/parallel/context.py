"""Context parallelism: every document of a packed micro-batch split over the cp ranks.

Each document (padded to a multiple of ``2·cp`` tokens) is cut into ``2·cp`` equal chunks;
cp rank ``i`` takes chunks ``i`` and ``2·cp − 1 − i``. Under a causal mask chunk ``k`` of ``n``
attends to about ``(k + ½)·c²`` query–key pairs (``c`` tokens per chunk), so rank ``i`` does

    (i + ½) + (2·cp − 1 − i + ½) = 2·cp        (in units of c²)

— the same for every rank (the load-balanced layout of Megatron-LM's context parallelism).
Worked example, cp = 2, a document of 8 tokens: chunks of 2, rank 0 holds tokens 0–1 and 6–7,
rank 1 tokens 2–5.

Attention needs every key and value of a document: each rank computes K and V for its own
tokens (with their true positions, so rotary embeddings are unchanged), then they are
all-gathered over the cp group (backward: reduce-scatter of their gradients). Per layer and
micro-batch a rank receives ``(cp − 1)/cp`` of the micro-batch's K and V, ``2·T·kv_dim/tp``
values. Queries stay local; the document-causal mask (:mod:`hydraulis.runtime.model.attention`) reads
each token's document and position, so the gathered order does not matter.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from hydraulis.runtime.parallel.group import ParallelGroup, conjugate


def load_balanced_indices(cu_seqlens: Sequence[int], cp: int, rank: int) -> list[int]:
    """Token indices of cp rank ``rank`` in a packed micro-batch whose documents are
    ``cu_seqlens`` (each a multiple of ``2·cp`` long), documents in order."""
    chunks = 2 * cp
    indices: list[int] = []
    for start, stop in zip(cu_seqlens[:-1], cu_seqlens[1:]):
        length = stop - start
        if length % chunks:
            raise ValueError(f"document [{start}, {stop}) is not a multiple of 2·cp = {chunks} tokens")
        size = length // chunks
        for chunk in (rank, chunks - 1 - rank):
            indices.extend(range(start + chunk * size, start + (chunk + 1) * size))
    return indices


def gather_from_context(x: torch.Tensor, group: ParallelGroup) -> torch.Tensor:
    """All cp ranks' ``x`` concatenated rank-major along dim 0; the gradient of each rank's
    part is summed back to it."""
    return x if group.trivial else conjugate(x, group.all_gather, group.reduce_scatter)

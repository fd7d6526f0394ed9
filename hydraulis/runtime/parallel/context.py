"""Context parallelism: every document of a packed micro-batch split over the cp ranks.

Each document (padded to a multiple of ``2·cp`` tokens) is cut into ``2·cp`` equal chunks;
cp rank ``i`` takes chunks ``i`` and ``2·cp − 1 − i``. Under a causal mask chunk ``k`` of ``n``
attends to about ``(k + ½)·c²`` query–key pairs (``c`` tokens per chunk), so rank ``i`` does

    (i + ½) + (2·cp − 1 − i + ½) = 2·cp        (in units of c²)

— the same for every rank (the load-balanced layout of Megatron-LM's context parallelism).
Worked example, cp = 2, a document of 8 tokens: chunks of 2, rank 0 holds tokens 0–1 and 6–7,
rank 1 tokens 2–5.

The details: :func:`context_spans`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from hydraulis.runtime.model.attention_spans import Span
from hydraulis.runtime.parallel.group import ParallelGroup, conjugate, finished


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


def start_gather_from_context(x: torch.Tensor, group: ParallelGroup) -> Callable[[], torch.Tensor]:
    """The all-gather of every cp rank's ``x`` started; the function returned waits for it and
    gives the ranks' ``x`` concatenated rank-major along dim 0, whose gradient sums each rank's
    part back to it (a reduce-scatter). Work that does not need the gathered rows runs between
    the two calls (:func:`context_spans`)."""
    if group.trivial:
        return lambda: x
    gathered, work = group.all_gather_start(x.detach())

    def wait() -> torch.Tensor:
        ready = finished(gathered, work)
        return conjugate(x, lambda _: ready, group.reduce_scatter)

    return wait


def context_spans(cu_seqlens: Sequence[int], cp: int, rank: int) -> list[Span]:
    """The attention spans of cp rank ``rank`` (its two chunks of every document, in the
    order of :func:`load_balanced_indices`), keys addressed in the gathered K/V: rank ``r``'s
    tokens at rows ``[r·T/cp, (r+1)·T/cp)``. With cp = 1 every document is one span.

    Attention needs the keys and values before a chunk (as Llama 3 does, Dubey et al. 2024): each
    rank computes K and V for its own tokens (with their true positions, so rotary embeddings are
    unchanged), then they are all-gathered over the cp group (backward: reduce-scatter of their
    gradients). The all-gather starts as soon as K is rotated, and Q is rotated while it runs
    (:func:`start_gather_from_context`). Nothing more can overlap it: the query projection runs
    before, in the same function as the K and V projections (:mod:`.columns`), and attention needs
    the gathered K and V; in the backward the reduce-scatter's result is the gradient its node
    returns, so it is waited for at once. Per layer and micro-batch a rank receives ``(cp − 1)/cp``
    of the micro-batch's K and V, ``2·T·kv_dim/tp`` values. Queries stay local: chunk ``k`` of a
    document is one attention span (:mod:`hydraulis.runtime.model.attention_spans`), its ``c`` queries
    against the document's keys up to the chunk's end, ``(k + 1)·c`` of them, causal at the bottom
    right — never a mask of queries × keys. Its score entries number ``c²/2 + k·c²``, so rank ``i`` computes
    ``(i + ½ + 2·cp − 1 − i + ½)·c² = 2·cp·c²`` per document: every rank the same work.
    """
    if cp == 1:
        return [Span(a, b - a, np.arange(a, b)) for a, b in zip(cu_seqlens[:-1], cu_seqlens[1:])]
    chunks, part = 2 * cp, cu_seqlens[-1] // cp
    spans, local = [], 0
    for start, stop in zip(cu_seqlens[:-1], cu_seqlens[1:]):
        size = (stop - start) // chunks
        rows = [np.arange(owner * part + local + late * size, owner * part + local + (late + 1) * size)
                for owner, late in ((k, 0) if k < cp else (chunks - 1 - k, 1) for k in range(chunks))]
        for late, chunk in enumerate((rank, chunks - 1 - rank)):
            spans.append(Span(local + late * size, size, np.concatenate(rows[:chunk + 1])))
        local += 2 * size
    return spans

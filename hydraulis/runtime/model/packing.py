"""A micro-batch of a step plan turned into the tensors one rank runs.

A sequence of length ``s`` in a plan is a document of ``s + 1`` tokens ``t₀ … t_s``: inputs
``t₀ … t_{s−1}``, labels ``t₁ … t_s``, so all ``s`` positions carry a loss. Documents are packed
one after the other, each padded to a multiple of the alignment (``lcm(plan alignment, 2·cp)``
under context parallelism, see :mod:`hydraulis.runtime.parallel.context`); padding tokens have
label ``IGNORE_INDEX`` and come after their document's tokens, so no real token attends to them
(causal) and their outputs carry no loss. Positions restart at 0 in every document.

Attention runs document by document (:class:`~hydraulis.runtime.model.attention.DocumentBlock`): a
rank keeps its tokens document by document, so each document's queries are consecutive rows;
under context parallelism its keys are one run of rows in every cp rank's part of the gathered
keys (rank-major), and its mask is the document-causal mask of those rows.

Worked example, lengths (3, 2), cp = 2 (alignment 4): ``cu_seqlens = (0, 4, 8)``, positions
``0 1 2 3 | 0 1 2 3``, labels ``t₁ t₂ t₃ ∅ | u₁ u₂ ∅ ∅``; cp rank 0 keeps tokens 0, 3, 4, 7 and
rank 1 tokens 1, 2, 5, 6. Document 0's queries on rank 0 are its rows 0–1 (tokens 0, 3), its
keys the gathered rows 0, 1, 4, 5 (tokens 0, 3, 1, 2) under a 2 × 4 mask.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from hydraulis.errors import require
from hydraulis.runtime.model.attention import DocumentBlock, document_causal_mask
from hydraulis.runtime.parallel.context import load_balanced_indices
from hydraulis.runtime.parallel.group import ParallelGroup
from hydraulis.runtime.parallel.tensor import IGNORE_INDEX
from hydraulis.types import MicroBatch


Documents = Sequence[np.ndarray | torch.Tensor]
"""A global batch's token documents, indexed by the plan's sequence numbers."""


@dataclass(frozen=True)
class PackedMicroBatch:
    """This rank's tokens of one micro-batch. ``blocks`` are its documents' attention blocks
    (queries against the keys of all cp ranks, rank-major); None when the varlen kernel runs
    over ``cu_seqlens`` instead."""

    input_ids: torch.Tensor
    labels: torch.Tensor
    positions: torch.Tensor
    blocks: tuple[DocumentBlock, ...] | None
    cu_seqlens: torch.Tensor
    max_seqlen: int
    sequence_shards: int = 1

    @property
    def tokens(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def hidden_rows(self) -> int:
        """Rows of the hidden states a tp rank holds between blocks (and hands to the next stage)."""
        return self.tokens // self.sequence_shards


def cp_alignment(alignment: int, cp: int) -> int:
    """Every packed document is a multiple of this many tokens."""
    return alignment if cp == 1 else math.lcm(alignment, 2 * cp)


def packed_bounds(micro_batch: MicroBatch, alignment: int, cp: int, sequence_shards: int = 1) -> tuple[int, ...]:
    """Document starts of the packed micro-batch: each document padded to a multiple of
    :func:`cp_alignment`, then the last one further so that every cp rank's tokens split evenly
    over ``sequence_shards`` (the tp ranks under sequence parallelism). Worked example, lengths
    (5, 9), alignment 1, cp 1, 4 shards: ``(0, 5, 16)`` — 14 tokens padded to 16."""
    unit = cp_alignment(alignment, cp)
    bounds = list(micro_batch.cu_seqlens(unit))
    step = math.lcm(unit, cp * sequence_shards)
    bounds[-1] = math.ceil(bounds[-1] / step) * step
    return tuple(bounds)


def pack_micro_batch(documents: Documents, micro_batch: MicroBatch, alignment: int,
                     cp: ParallelGroup, device: torch.device, varlen: bool = False,
                     sequence_shards: int = 1) -> PackedMicroBatch:
    """Pack ``micro_batch``'s documents (token tensors of ``length + 1``) for cp rank ``cp.rank``;
    under sequence parallelism over ``sequence_shards`` tp ranks, a multiple of them per cp rank."""
    require(len(micro_batch.sequences) > 0, "micro_batch.sequences", [], "must not be empty")
    bounds = packed_bounds(micro_batch, alignment, cp.size, sequence_shards)
    total = bounds[-1]
    input_ids = torch.zeros(total, dtype=torch.long)
    labels = torch.full((total,), IGNORE_INDEX, dtype=torch.long)
    positions = torch.empty(total, dtype=torch.long)
    docs = torch.empty(total, dtype=torch.long)
    for k, (sequence, length) in enumerate(zip(micro_batch.sequences, micro_batch.lengths)):
        tokens = torch.as_tensor(documents[sequence], dtype=torch.long)
        require(tokens.numel() == length + 1, f"micro_batch.lengths[{k}]", length,
                f"disagrees with sequence {sequence} of the batch ({tokens.numel() - 1} tokens)")
        start, stop = bounds[k], bounds[k + 1]
        input_ids[start:start + length] = tokens[:-1]
        labels[start:start + length] = tokens[1:]
        positions[start:stop] = torch.arange(stop - start)
        docs[start:stop] = k
    cu_seqlens = torch.tensor(bounds, dtype=torch.int32, device=device)
    max_seqlen = max(b - a for a, b in zip(bounds[:-1], bounds[1:]))
    if cp.trivial:
        mine = keys = torch.arange(total)
    else:
        per_rank = [load_balanced_indices(bounds, cp.size, r) for r in range(cp.size)]
        mine, keys = torch.tensor(per_rank[cp.rank]), torch.tensor([i for part in per_rank for i in part])
    blocks = None if varlen else _document_blocks(bounds, cp.size, docs, positions, mine, keys, device)
    return PackedMicroBatch(
        input_ids=input_ids[mine].to(device),
        labels=labels[mine].to(device),
        positions=positions[mine].to(device),
        blocks=blocks,
        cu_seqlens=cu_seqlens,
        max_seqlen=max_seqlen,
        sequence_shards=sequence_shards,
    )


def _document_blocks(bounds: Sequence[int], cp: int, docs: torch.Tensor, positions: torch.Tensor,
                     mine: torch.Tensor, keys: torch.Tensor, device: torch.device) -> tuple[DocumentBlock, ...]:
    """Each document's rows among this rank's queries and among the gathered keys (module
    docstring): a document of ``n`` tokens is ``n/cp`` consecutive rows of every rank's part."""
    if cp == 1:
        return tuple(DocumentBlock(a, b, slice(a, b), None) for a, b in zip(bounds[:-1], bounds[1:]))
    part = bounds[-1] // cp
    blocks, start = [], 0
    for a, b in zip(bounds[:-1], bounds[1:]):
        stop = start + (b - a) // cp
        rows = torch.cat([torch.arange(r * part + start, r * part + stop) for r in range(cp)])
        query, key = mine[start:stop], keys[rows]
        mask = document_causal_mask(docs[query], positions[query], docs[key], positions[key])
        blocks.append(DocumentBlock(start, stop, rows.to(device), mask.to(device)))
        start = stop
    return tuple(blocks)

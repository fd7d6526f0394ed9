"""A micro-batch of a step plan turned into the tensors one rank runs.

A sequence of length ``s`` in a plan is a document of ``s + 1`` tokens ``t₀ … t_s``: inputs
``t₀ … t_{s−1}``, labels ``t₁ … t_s``, so all ``s`` positions carry a loss. Documents are packed
one after the other, each padded to a multiple of the alignment (``lcm(plan alignment, 2·cp)``
under context parallelism, see :mod:`hydraulis.runtime.parallel.context`); padding tokens have
label ``IGNORE_INDEX`` and come after their document's tokens, so no real token attends to them
(causal) and their outputs carry no loss. Positions restart at 0 in every document.

Attention runs over spans (:mod:`hydraulis.runtime.model.attention_spans`): a rank keeps its tokens
document by document, so a document's queries — or, under context parallelism, each of its
chunks' — are consecutive rows, run against the document's keys up to their end in the keys the
cp group gathers (rank-major). The plan for the rank's kernel (:func:`~hydraulis.runtime.model.attention.attention_kernel`)
is built here, once per micro-batch, and serves every layer.

Worked example, lengths (3, 2), cp = 2 (alignment 4): ``cu_seqlens = (0, 4, 8)``, positions
``0 1 2 3 | 0 1 2 3``, labels ``t₁ t₂ t₃ ∅ | u₁ u₂ ∅ ∅``; cp rank 0 keeps tokens 0, 3, 4, 7 and
rank 1 tokens 1, 2, 5, 6. On rank 0 document 0 gives two spans: its row 0 (token 0) against
gathered key row 0, and its row 1 (token 3) against key rows 0, 4, 5, 1 (tokens 0, 1, 2, 3).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from hydraulis.base.errors import require
from hydraulis.base.types import MicroBatch
from hydraulis.runtime.model.attention import KernelKind, attention_kernel
from hydraulis.runtime.model.attention_spans import AttentionPlan, document_plan, span_plan, to_device, varlen_plan
from hydraulis.runtime.parallel.context import context_spans, load_balanced_indices
from hydraulis.runtime.parallel.group import ParallelGroup
from hydraulis.runtime.parallel.tensor import IGNORE_INDEX

Documents = Sequence[np.ndarray | torch.Tensor]
"""A global batch's token documents, indexed by the plan's sequence numbers."""


@dataclass(frozen=True)
class PackedMicroBatch:
    """This rank's tokens of one micro-batch (its cp share, in document order), the attention
    plan of its spans, and the packed document starts ``cu_seqlens`` (of the whole
    micro-batch, int32)."""

    input_ids: torch.Tensor
    labels: torch.Tensor
    positions: torch.Tensor
    attention: AttentionPlan
    cu_seqlens: torch.Tensor
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


def packed_rows(micro_batch: MicroBatch, alignment: int, cp: int, sequence_shards: int = 1) -> int:
    """:attr:`PackedMicroBatch.hidden_rows` of ``micro_batch`` packed, without packing it: its
    :func:`packed_bounds` total split over the ``cp`` ranks and the ``sequence_shards``. Worked
    example, lengths (5, 9), alignment 1, cp 1, 4 shards: 16 tokens, 4 rows."""
    return packed_bounds(micro_batch, alignment, cp, sequence_shards)[-1] // cp // sequence_shards


def pack_micro_batch(documents: Documents, micro_batch: MicroBatch, alignment: int,
                     cp: ParallelGroup, device: torch.device, kernel: KernelKind | None = None,
                     sequence_shards: int = 1) -> PackedMicroBatch:
    """Pack ``micro_batch``'s documents (token tensors of ``length + 1``) for cp rank ``cp.rank``,
    with the attention plan of ``kernel`` (default: the fp32 kernel of ``device``); under
    sequence parallelism over ``sequence_shards`` tp ranks, a multiple of them per cp rank."""
    require(len(micro_batch.sequences) > 0, "micro_batch.sequences", [], "must not be empty")
    bounds = packed_bounds(micro_batch, alignment, cp.size, sequence_shards)
    total = bounds[-1]
    input_ids, labels, positions = _packed_tokens(documents, micro_batch, bounds)
    mine = torch.arange(total) if cp.trivial else torch.tensor(load_balanced_indices(bounds, cp.size, cp.rank))
    varlen = (kernel or attention_kernel(device, torch.float32)) is KernelKind.VARLEN
    if varlen and cp.trivial:
        attention = document_plan(bounds, device)
    elif varlen:
        attention = varlen_plan(context_spans(bounds, cp.size, cp.rank), mine.numel(), device)
    else:
        attention = span_plan(context_spans(bounds, cp.size, cp.rank), mine.numel(), total, device)
    return PackedMicroBatch(
        input_ids=to_device(input_ids[mine], device),
        labels=to_device(labels[mine], device),
        positions=to_device(positions[mine], device),
        attention=attention,
        cu_seqlens=to_device(torch.tensor(bounds, dtype=torch.int32), device),
        sequence_shards=sequence_shards,
    )


def _packed_tokens(documents: Documents, micro_batch: MicroBatch,
                   bounds: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Inputs, labels and positions of the packed micro-batch (module docstring), gathered from
    the documents concatenated, with index arithmetic rather than a loop over the documents:
    token ``j`` of document ``k`` lands at row ``bounds[k] + j``."""
    tokens = [torch.as_tensor(documents[sequence], dtype=torch.long).reshape(-1) for sequence in micro_batch.sequences]
    sizes = np.array([t.shape[0] for t in tokens])
    lengths = np.array(micro_batch.lengths)
    wrong = np.flatnonzero(sizes != lengths + 1)
    if wrong.size:
        k = int(wrong[0])
        require(False, f"micro_batch.lengths[{k}]", int(lengths[k]),
                f"disagrees with sequence {micro_batch.sequences[k]} of the batch ({sizes[k] - 1} tokens)")
    starts = np.asarray(bounds)
    within = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    rows = torch.from_numpy(np.repeat(starts[:-1], lengths) + within)
    source = torch.from_numpy(np.repeat(np.cumsum(sizes) - sizes, lengths) + within)
    concatenated = torch.cat(tokens)
    total = int(starts[-1])
    input_ids = torch.zeros(total, dtype=torch.long)
    labels = torch.full((total,), IGNORE_INDEX, dtype=torch.long)
    input_ids[rows] = concatenated[source]
    labels[rows] = concatenated[source + 1]
    spans = np.diff(starts)
    positions = torch.from_numpy(np.arange(total) - np.repeat(starts[:-1], spans))
    return input_ids, labels, positions

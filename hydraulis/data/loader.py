"""Token-budget loader: documents → pieces of at most ``S`` tokens → global batches of at most
``T`` tokens, epoch after epoch, resumable from a saved position.

Recipe for epoch ``e`` (:func:`plan_epoch`):

1. order the documents by a permutation drawn from ``seed`` and ``e`` (or keep corpus order
   when ``shuffle`` is off);
2. cut each document longer than ``S`` into ``⌊s/S⌋`` pieces of ``S`` and the remainder, all
   kept and adjacent (:func:`hydraulis.base.workload.cut_to_max`);
3. fill batches in that order while their total stays within ``T``
   (:func:`hydraulis.base.workload.fill_to_budget`); the epoch's last batch may be partial.

Every token of every document is in exactly one batch of each epoch. A
:class:`LoaderPosition` ``(epoch, batch)`` names the next batch; resuming recomputes the
epoch's plan from the lengths alone (cheap) and continues there, so an interrupted run yields
exactly the batches an uninterrupted one does.

Worked example, shuffle off: documents of (700, 300, 2500, 100) tokens with ``S = 1000``,
``T = 1500`` give pieces (700, 300, 1000, 1000, 500, 100) and four batches (700, 300),
(1000,), (1000, 500), (100,); the third batch holds tokens 1000–1999 and 2000–2499 of
document 2, and resuming at ``LoaderPosition(0, 2)`` yields the last two batches.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from hydraulis.base.errors import require, require_int
from hydraulis.base.workload import cut_to_max, fill_to_budget, positive_lengths


@dataclass(frozen=True)
class LoaderConfig:
    """Token budget ``T`` per global batch, maximum sequence length ``S`` (``S ≤ T``), shuffle seed."""

    token_budget: int
    max_seq_len: int
    seed: int = 0
    shuffle: bool = True

    def __post_init__(self) -> None:
        require_int(self.token_budget, "token_budget", minimum=1)
        require_int(self.max_seq_len, "max_seq_len", minimum=1)
        require_int(self.seed, "seed", minimum=0)
        require(isinstance(self.shuffle, bool), "shuffle", self.shuffle, "must be true or false")
        require(self.token_budget >= self.max_seq_len, "token_budget", self.token_budget,
                f"is smaller than one sequence of max_seq_len = {self.max_seq_len} tokens")


@dataclass(frozen=True)
class LoaderPosition:
    """The next batch to yield: batch ``batch`` (from 0) of epoch ``epoch``. Save it in checkpoints."""

    epoch: int = 0
    batch: int = 0

    def __post_init__(self) -> None:
        require_int(self.epoch, "position.epoch", minimum=0)
        require_int(self.batch, "position.batch", minimum=0)


@dataclass(frozen=True, eq=False)
class EpochPlan:
    """One epoch's pieces in batch order: piece ``i`` is tokens ``starts[i]`` to
    ``starts[i] + lengths[i]`` of document ``documents[i]``; batch ``b`` holds pieces
    ``bounds[b]`` to ``bounds[b + 1]``."""

    epoch: int
    documents: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray
    bounds: np.ndarray

    @property
    def batches(self) -> int:
        return self.bounds.size - 1

    def pieces(self, batch: int) -> slice:
        return slice(int(self.bounds[batch]), int(self.bounds[batch + 1]))

    def batch_lengths(self) -> list[np.ndarray]:
        return np.split(self.lengths, self.bounds[1:-1])


@dataclass(frozen=True, eq=False)
class GlobalBatch:
    """One step's sequences: token ids of each, their lengths and source documents;
    ``next_position`` is where to resume after training on this batch."""

    position: LoaderPosition
    next_position: LoaderPosition
    documents: np.ndarray
    lengths: np.ndarray
    tokens: tuple[np.ndarray, ...] = field(repr=False)


def plan_epoch(lengths: Sequence[int] | np.ndarray, config: LoaderConfig, epoch: int) -> EpochPlan:
    """The pieces and batches of epoch ``epoch`` for documents of ``lengths`` tokens."""
    require_int(epoch, "epoch", minimum=0)
    lengths = document_lengths(lengths)
    order = (np.random.default_rng([config.seed, epoch]).permutation(lengths.size) if config.shuffle
             else np.arange(lengths.size))
    pieces = cut_to_max(lengths[order], config.max_seq_len)
    counts = -(-lengths[order] // config.max_seq_len)
    first_piece = np.repeat(np.cumsum(counts) - counts, counts)
    starts = (np.arange(pieces.size) - first_piece) * config.max_seq_len
    sizes = [batch.size for batch in fill_to_budget(pieces, config.token_budget)]
    bounds = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    return EpochPlan(epoch, np.repeat(order, counts), starts, pieces, bounds)


class TokenBudgetLoader:
    """Global batches of ``documents`` (token-id arrays) under ``config``.

    ``for batch in loader.batches(position): train(batch.tokens); save(batch.next_position)``
    """

    def __init__(self, documents: Sequence[np.ndarray], config: LoaderConfig) -> None:
        self.documents = documents
        self.config = config
        self.lengths = document_lengths([len(d) for d in documents])

    def plan(self, epoch: int) -> EpochPlan:
        return plan_epoch(self.lengths, self.config, epoch)

    def batches(self, start: LoaderPosition = LoaderPosition(), end_epoch: int | None = None) -> Iterator[GlobalBatch]:
        """Batches from ``start`` up to (not including) epoch ``end_epoch``; forever when ``None``."""
        epoch, first = start.epoch, start.batch
        while end_epoch is None or epoch < end_epoch:
            plan = self.plan(epoch)
            require(first < plan.batches, "position.batch", first,
                    f"is past the last batch of epoch {epoch}, which has {plan.batches}")
            for index in range(first, plan.batches):
                yield self._batch(plan, index)
            epoch, first = epoch + 1, 0

    def _batch(self, plan: EpochPlan, index: int) -> GlobalBatch:
        chosen = plan.pieces(index)
        documents, starts, lengths = plan.documents[chosen], plan.starts[chosen], plan.lengths[chosen]
        tokens = tuple(self.documents[d][s:s + n] for d, s, n in zip(documents.tolist(), starts.tolist(), lengths.tolist()))
        following = (LoaderPosition(plan.epoch, index + 1) if index + 1 < plan.batches
                     else LoaderPosition(plan.epoch + 1, 0))
        return GlobalBatch(LoaderPosition(plan.epoch, index), following, documents, lengths, tokens)


def document_lengths(lengths: Sequence[int] | np.ndarray) -> np.ndarray:
    """``lengths`` as a flat ``int64`` array, checked: at least one, all positive integers."""
    values = positive_lengths(lengths)
    require(values.size > 0, "lengths", "[]", "is empty; need at least one document")
    return values

"""Training data: token documents, global batches filled to a token budget, resumable.

Documents come from a real corpus (token ids of a tokenized corpus, :mod:`hydraulis.data`) or
are synthetic: document ``i`` has the ``i``-th length of a pool (a lengths file, or a long tail
drawn from the seed: lognormal with median ``S/4`` and σ = 1) and follows
``x_{k+1} = (x_k + δ_i) mod V`` from a start ``x_0`` and stride ``δ_i ∈ [1, 16]`` drawn from the
seed — learnable from context (the loss falls as the model infers ``δ``), generated on demand
(:class:`SyntheticCorpus`), numpy only.

Either way the :class:`~hydraulis.data.loader.TokenBudgetLoader` cuts documents into pieces of
at most ``S`` tokens and fills global batches of at most ``T`` tokens, epoch after epoch, from a
:class:`~hydraulis.data.loader.LoaderPosition` (saved in checkpoints). A piece of ``n`` tokens
``t₀ … t_{n−1}`` is one training sequence of length ``n − 1`` (inputs ``t₀ … t_{n−2}``, labels
``t₁ … t_{n−1}``; :mod:`.model.packing`); a piece of a single token has nothing to predict and is
left out. Worked example: ``T = 8``, ``S = 4``, documents of 6 and 2 tokens give pieces 4, 2, 2:
one batch of sequence lengths (3, 1, 1), 5 loss tokens.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from hydraulis.data.loader import LoaderConfig, LoaderPosition, TokenBudgetLoader

MAX_STRIDE = 16
POOL_SIZE = 4096


@dataclass(frozen=True)
class StepBatch:
    """One step's sequences: ``lengths[i]`` and the ``lengths[i] + 1`` tokens ``documents[i]``;
    ``next_position`` is where the loader resumes after this step."""

    lengths: tuple[int, ...]
    documents: tuple[np.ndarray, ...]
    position: LoaderPosition
    next_position: LoaderPosition


@dataclass(frozen=True)
class TrainingData:
    """Documents, how batches are cut from them, and a fingerprint that names them (a resumed
    job must see the same: the loader position means nothing on other documents)."""

    documents: Sequence
    loader: LoaderConfig
    fingerprint: str

    def batches(self, start: LoaderPosition = LoaderPosition()) -> Iterator[StepBatch]:
        """Global batches from ``start`` on, forever (epoch after epoch)."""
        for batch in TokenBudgetLoader(self.documents, self.loader).batches(start):
            kept = [i for i, tokens in enumerate(batch.tokens) if len(tokens) > 1]
            yield StepBatch(tuple(len(batch.tokens[i]) - 1 for i in kept), tuple(batch.tokens[i] for i in kept),
                            batch.position, batch.next_position)


class SyntheticDocument:
    """``length`` tokens ``(start + stride·k) mod vocab``, made when sliced."""

    def __init__(self, start: int, stride: int, length: int, vocab: int) -> None:
        self.start, self.stride, self.length, self.vocab = start, stride, length, vocab

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, window: slice) -> np.ndarray:
        first, stop, _ = window.indices(self.length)
        return (self.start + self.stride * np.arange(first, stop, dtype=np.int64)) % self.vocab


class SyntheticCorpus(Sequence):
    """Synthetic documents of the given ``lengths`` (module docstring)."""

    def __init__(self, lengths: Sequence[int] | np.ndarray, vocab: int, seed: int) -> None:
        self.lengths = np.asarray(lengths, dtype=np.int64)
        rng = np.random.default_rng([seed, vocab])
        self.starts = rng.integers(0, vocab, self.lengths.size)
        self.strides = rng.integers(1, MAX_STRIDE + 1, self.lengths.size)
        self.vocab = vocab

    def __len__(self) -> int:
        return int(self.lengths.size)

    def __getitem__(self, index: int) -> SyntheticDocument:
        return SyntheticDocument(int(self.starts[index]), int(self.strides[index]), int(self.lengths[index]),
                                 self.vocab)


def synthetic_lengths(max_seq_len: int, seed: int) -> np.ndarray:
    """A long-tailed pool of ``POOL_SIZE`` document lengths (module docstring)."""
    rng = np.random.default_rng(seed)
    return np.maximum(1, rng.lognormal(np.log(max(max_seq_len / 4, 1.0)), 1.0, POOL_SIZE).astype(np.int64))

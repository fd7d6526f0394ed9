"""Synthetic training data: step lengths filled to a token budget, and token documents.

Lengths: a pool of document lengths (a lengths file, or a synthetic long tail: lognormal with
median ``S/4`` and σ = 1, so most documents are short and some exceed ``S``), cut to pieces of
at most ``S = max_seq_len`` and drawn into global batches filled to the token budget by
:func:`hydraulis.workload.sample_batches` — deterministic for a seed.

Tokens: document ``i`` of step ``t`` with length ``s`` is ``s + 1`` tokens following
``x_{k+1} = (x_k + δ) mod V`` from a random start ``x_0`` and stride ``δ ∈ [1, 16]``, both drawn
from a generator seeded by ``(seed, t)``. Every rank and the reference therefore see the same
tokens, and the task is learnable from context (the loss falls as the model infers ``δ``).
numpy only, so that configs resolve without torch.
"""

from __future__ import annotations

import numpy as np

from hydraulis.workload import sample_batches

MAX_STRIDE = 16
POOL_SIZE = 4096


def synthetic_lengths(max_seq_len: int, seed: int) -> np.ndarray:
    """A long-tailed pool of document lengths (module docstring)."""
    rng = np.random.default_rng(seed)
    return np.maximum(1, rng.lognormal(np.log(max(max_seq_len / 4, 1.0)), 1.0, POOL_SIZE).astype(np.int64))


def step_lengths(pool: np.ndarray, token_budget: int, steps: int, max_seq_len: int, seed: int) -> list[tuple[int, ...]]:
    """The sequence lengths of each of ``steps`` global batches."""
    return [tuple(int(s) for s in batch) for batch in sample_batches(pool, token_budget, steps, max_seq_len, seed)]


def step_documents(vocab: int, seed: int, step: int, lengths: tuple[int, ...]) -> list[np.ndarray]:
    """The token documents (``s + 1`` tokens each, ``int64``) of step ``step``."""
    rng = np.random.default_rng([seed, step])
    starts = rng.integers(0, vocab, len(lengths))
    strides = rng.integers(1, MAX_STRIDE + 1, len(lengths))
    return [(starts[i] + strides[i] * np.arange(s + 1, dtype=np.int64)) % vocab for i, s in enumerate(lengths)]

"""Workloads: document lengths → pieces of at most the maximum length → global batches.

Steps are filled to a global token budget ``T``, as in the reference system, rather than to a
fixed number of sequences (design §4): a batch takes documents in order while its total stays
within ``T``; the document that would overflow opens the next batch. A document longer than the
maximum length ``S`` is cut into ``⌊s/S⌋`` pieces of ``S`` tokens and the remainder, all kept.

Worked example: lengths (700, 300, 2500, 100) with ``S = 1000``, ``T = 1500`` become pieces
(700, 300, 1000, 1000, 500, 100) and batches (700, 300), (1000,), (1000, 500), (100,): the
second 1000 cannot join the first (2000 > T), the 500 joins it (1500 ≤ T), the 100 cannot.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hydraulis.base.errors import HydraulisError, require, require_int
from hydraulis.base.limits import check_sequences


def cut_to_max(lengths: Sequence[int] | np.ndarray, max_seq_len: int) -> np.ndarray:
    """Every length ``s > S`` replaced, in place, by ``⌊s/S⌋`` pieces of ``S`` and the remainder."""
    require_int(max_seq_len, "max_seq_len", minimum=1)
    s = positive_lengths(lengths)
    full, rest = np.divmod(s, max_seq_len)
    counts = full + (rest > 0)
    check_sequences(float(counts.sum()), "max_seq_len", max_seq_len, "the documents' pieces")
    pieces = np.full(int(counts.sum()), max_seq_len, dtype=np.int64)
    last = np.cumsum(counts) - 1
    pieces[last[rest > 0]] = rest[rest > 0]
    return pieces


def fill_to_budget(lengths: Sequence[int] | np.ndarray, token_budget: int) -> list[np.ndarray]:
    """Consecutive batches of ``lengths`` (each ≤ ``token_budget``); the last may be partial."""
    require_int(token_budget, "token_budget", minimum=1)
    s = positive_lengths(lengths)
    longest = int(s.max()) if s.size else 0
    require(longest <= token_budget, "token_budget", token_budget,
            f"is smaller than one sequence of {longest} tokens")
    cumulative = np.concatenate(([0], np.cumsum(s)))
    batches, start = [], 0
    while start < s.size:
        end = int(np.searchsorted(cumulative, cumulative[start] + token_budget, side="right")) - 1
        batches.append(s[start:end])
        start = end
    return batches


def sample_batches(
    lengths: Sequence[int] | np.ndarray, token_budget: int, steps: int, max_seq_len: int, seed: int = 0
) -> list[np.ndarray]:
    """``steps`` full batches of documents drawn i.i.d. (with replacement, by ``seed``) from the
    empirical distribution of ``lengths``, each cut to ``max_seq_len`` and filled to the budget."""
    require_int(steps, "steps", minimum=1)
    require_int(token_budget, "token_budget", minimum=1)
    require(token_budget >= max_seq_len, "token_budget", token_budget,
            f"is smaller than one sequence of max_seq_len = {max_seq_len} tokens")
    pieces = cut_to_max(lengths, max_seq_len)
    require(pieces.size > 0, "lengths", [], "must hold at least one length")
    rng = np.random.default_rng(seed)
    per_step = max(1, int(token_budget / pieces.mean()))
    check_sequences((steps + 1) * per_step, "steps", steps,
                    f"(steps + 1) × {per_step} sequences per step of token_budget = {token_budget}")
    drawn = pieces[rng.integers(0, pieces.size, size=(steps + 1) * per_step + 16)]
    batches = fill_to_budget(drawn, token_budget)
    while len(batches) <= steps:
        drawn = np.concatenate((drawn, pieces[rng.integers(0, pieces.size, size=per_step * steps + 16)]))
        batches = fill_to_budget(drawn, token_budget)
    return batches[:steps]


def positive_lengths(lengths: Sequence[int] | np.ndarray) -> np.ndarray:
    """``lengths`` as a flat ``int64`` array; non-integers and lengths ≤ 0 are errors naming the index."""
    s = np.asarray(lengths)
    if s.size and not np.issubdtype(s.dtype, np.integer):
        raise HydraulisError("lengths", s.dtype.name, "must be integers")
    s = s.astype(np.int64).ravel()
    bad = np.flatnonzero(s <= 0)
    if bad.size:
        raise HydraulisError(f"lengths[{int(bad[0])}]", int(s[bad[0]]), "must be a positive length")
    return s

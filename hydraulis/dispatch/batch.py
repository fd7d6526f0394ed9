"""One global batch made ready for dispatch: checked, aligned, oversize sequences handled.

The unit dispatch places is a *piece*: normally one sequence, or one part of a sequence the
caller asked to split. A piece of length ``s`` occupies ``s' = ⌈s/α⌉·α`` tokens of its
micro-batch for alignment ``α`` (the rounding of ``cu_seqlens``); capacities and times use ``s'``.

With the proposal's longest capacity ``S`` (rounded down to a multiple of ``α``), a sequence
with ``s' > S`` is an error, is truncated to ``S``, or is split into ``⌊s/S⌋`` pieces of ``S``
and the remainder. Worked example: ``S = 8``, ``α = 1``, lengths ``(3, 20)`` under ``split``
give pieces ``(3, 8, 8, 4)`` of sequences ``(0, 1, 1, 1)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hydraulis.base.errors import HydraulisError, require
from hydraulis.dispatch.options import DispatchOptions, OversizePolicy


@dataclass(frozen=True)
class Batch:
    """Pieces sorted longest first (equal lengths in the order the seed chose).

    ``sequence[k]`` is the index of piece ``k``'s sequence in the caller's lengths, ``length[k]``
    its length, ``tokens[k]`` the aligned tokens it occupies; ``notes`` say what was changed.
    """

    sequence: np.ndarray
    length: np.ndarray
    tokens: np.ndarray
    notes: tuple[str, ...]

    @property
    def size(self) -> int:
        return int(self.tokens.size)


def prepare_batch(lengths: Sequence[int] | np.ndarray, limit: int, options: DispatchOptions) -> Batch:
    """Check ``lengths`` and return its pieces for a proposal whose longest capacity is ``limit``."""
    s = _checked_lengths(lengths)
    alignment = options.alignment
    longest = (limit // alignment) * alignment
    require(longest >= 1, "alignment", alignment,
            f"exceeds the longest sequence any pipeline of the proposal can hold ({limit})")
    aligned = -(-s // alignment) * alignment
    over = np.flatnonzero(aligned > longest)
    sequence = np.arange(s.size)
    notes: list[str] = []
    if over.size:
        first = int(over[0])
        if options.oversize is OversizePolicy.ERROR:
            aligned_note = f" after alignment to {alignment}" if alignment > 1 else ""
            raise HydraulisError(f"lengths[{first}]", int(s[first]),
                                 f"exceeds the longest sequence any pipeline of the proposal can hold "
                                 f"({limit} tokens{aligned_note}); use oversize truncate or split")
        if options.oversize is OversizePolicy.TRUNCATE:
            s = np.minimum(s, longest)
            notes.append(f"truncated {over.size} sequence(s) to {longest} tokens (first: lengths[{first}])")
        else:
            counts = -(-s // longest)
            sequence = np.repeat(sequence, counts)
            s = _split_lengths(s, counts, longest)
            notes.append(f"split {over.size} sequence(s) into pieces of at most {longest} tokens "
                         f"(first: lengths[{first}])")
        aligned = -(-s // alignment) * alignment
    order = _longest_first(aligned, options.seed)
    return Batch(sequence[order], s[order], aligned[order], tuple(notes))


def _checked_lengths(lengths: Sequence[int] | np.ndarray) -> np.ndarray:
    s = np.asarray(lengths)
    require(s.ndim == 1, "lengths", f"shape {s.shape}", "must be a flat list of lengths")
    require(s.size > 0, "lengths", [], "must hold at least one sequence (the batch is empty)")
    if not np.issubdtype(s.dtype, np.integer):
        raise HydraulisError("lengths", s.dtype.name, "must be integers")
    s = s.astype(np.int64)
    bad = np.flatnonzero(s <= 0)
    if bad.size:
        raise HydraulisError(f"lengths[{int(bad[0])}]", int(s[bad[0]]), "must be a positive length")
    return s


def _split_lengths(s: np.ndarray, counts: np.ndarray, longest: int) -> np.ndarray:
    pieces = np.full(int(counts.sum()), longest, dtype=np.int64)
    last = np.cumsum(counts) - 1
    pieces[last] = s - (counts - 1) * longest
    return pieces


def _longest_first(tokens: np.ndarray, seed: int) -> np.ndarray:
    """Indices sorting ``tokens`` descending; ties in a seeded random order."""
    shuffle = np.random.default_rng(seed).permutation(tokens.size)
    return shuffle[np.argsort(-tokens[shuffle], kind="stable")]

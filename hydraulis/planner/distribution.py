"""Length distributions: a histogram of documents and statistics of the steps they fill.

Bucket ``b`` (width ``w``) holds lengths in ``(b·w, min((b+1)·w, S)]``; there are ``⌈S/w⌉``.
The planner needs, besides the document histogram, what one *step* holds: steps are filled to a
token budget ``T`` (:mod:`hydraulis.base.workload`), so a step's longest sequence ``m`` and its bucket
mix are random. For sampled steps ``i`` we keep

    m_i          the longest sequence of step i
    n_ib         the number of sequences of step i in bucket b
    Q1_ib, Q2_ib Σ s and Σ s² over those sequences

Because a scheme's work on a sequence is ``a·s² + b·s`` (design §6), ``a·Q2 + b·Q1`` is the
*exact* work of a bucket on any scheme, so merging buckets into classes loses nothing in work,
only in how finely work can be routed by length. The expected step of an interval of longest
lengths ``(lo, hi]`` is the mean of ``n, Q1, Q2`` over the sampled steps whose ``m_i`` lies in it.

Worked example (``w = 128``, ``S = 1000``): lengths (100, 300, 1000) fall in buckets 0, 2, 7
(the last one spans (896, 1000]); a step holding them has ``m = 1000``, ``Q1 = 1400``,
``Q2 = 1,100,000``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hydraulis.base.errors import require, require_int


@dataclass(frozen=True, eq=False)
class LengthHistogram:
    """Documents per bucket (``counts[b]``) after cutting to ``max_seq_len``."""

    bucket_width: int
    max_seq_len: int
    counts: np.ndarray

    def quantile(self, q: float) -> int:
        """Upper edge of the bucket holding the ``q``-quantile (a bucket-width resolution)."""
        cumulative = np.cumsum(self.counts)
        index = int(np.searchsorted(cumulative, q * cumulative[-1], side="left"))
        return min((index + 1) * self.bucket_width, self.max_seq_len)


@dataclass(frozen=True, eq=False)
class ExpectedStep:
    """The expected step of some steps: per bucket ``counts`` (``n_b``), ``tokens`` (``Q1_b``),
    ``squares`` (``Q2_b``); ``upper`` is each bucket's longest possible length and ``maxima``
    the averaged steps' longest sequences."""

    counts: np.ndarray
    tokens: np.ndarray
    squares: np.ndarray
    upper: np.ndarray
    maxima: np.ndarray


@dataclass(frozen=True, eq=False)
class StepStatistics:
    """Per sampled step (rows) and bucket (columns): ``counts``, ``tokens``, ``squares``;
    ``maxima[i]`` is step i's longest sequence."""

    bucket_width: int
    max_seq_len: int
    maxima: np.ndarray
    counts: np.ndarray
    tokens: np.ndarray
    squares: np.ndarray

    @property
    def upper(self) -> np.ndarray:
        """Longest length of each bucket: ``min((b+1)·w, S)``."""
        edges = np.arange(1, self.counts.shape[1] + 1, dtype=np.int64) * self.bucket_width
        return np.minimum(edges, self.max_seq_len)

    def serving(self, lo: int, hi: int) -> np.ndarray:
        """Indices of the steps whose longest sequence lies in ``(lo, hi]``."""
        return np.flatnonzero((self.maxima > lo) & (self.maxima <= hi))

    def workload(self, steps: np.ndarray) -> ExpectedStep:
        """The mean of the given steps (``steps`` non-empty)."""
        require(len(steps) > 0, "steps", 0, "an expected step needs at least one sampled step")
        return ExpectedStep(
            counts=self.counts[steps].mean(axis=0),
            tokens=self.tokens[steps].mean(axis=0),
            squares=self.squares[steps].mean(axis=0),
            upper=self.upper,
            maxima=self.maxima[steps],
        )


def length_histogram(lengths: np.ndarray, bucket_width: int, max_seq_len: int) -> LengthHistogram:
    """Histogram of ``lengths`` (already cut to ``max_seq_len``) in buckets of ``bucket_width``."""
    require_int(bucket_width, "bucket_width", minimum=1)
    s = np.asarray(lengths, dtype=np.int64)
    require(s.size > 0 and int(s.max()) <= max_seq_len, "lengths", int(s.max()) if s.size else None,
            f"must be non-empty and cut to max_seq_len = {max_seq_len}")
    counts = np.bincount(_bucket(s, bucket_width), minlength=_buckets(bucket_width, max_seq_len))
    return LengthHistogram(bucket_width, max_seq_len, counts.astype(np.int64))


def step_statistics(batches: Sequence[np.ndarray], bucket_width: int, max_seq_len: int) -> StepStatistics:
    """:class:`StepStatistics` of ``batches`` (each a step's lengths, all ≤ ``max_seq_len``)."""
    require(len(batches) > 0, "steps", 0, "must hold at least one step")
    buckets = _buckets(bucket_width, max_seq_len)
    shape = (len(batches), buckets)
    counts, tokens, squares = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    for i, batch in enumerate(batches):
        s = np.asarray(batch, dtype=np.float64)
        index = _bucket(np.asarray(batch, dtype=np.int64), bucket_width)
        counts[i] = np.bincount(index, minlength=buckets)
        tokens[i] = np.bincount(index, weights=s, minlength=buckets)
        squares[i] = np.bincount(index, weights=s * s, minlength=buckets)
    maxima = np.array([int(np.max(b)) for b in batches], dtype=np.int64)
    return StepStatistics(bucket_width, max_seq_len, maxima, counts, tokens, squares)


def _buckets(bucket_width: int, max_seq_len: int) -> int:
    return -(-max_seq_len // bucket_width)


def _bucket(lengths: np.ndarray, bucket_width: int) -> np.ndarray:
    return (lengths - 1) // bucket_width

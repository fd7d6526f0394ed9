"""Length statistics: how long-tailed a corpus is, and what that does to each step.

For document lengths ``s_1 … s_n`` (tokens) and length buckets ``(low, high]``:

* the share of **documents** in a bucket, ``|{i : s_i ∈ bucket}| / n``;
* the share of **tokens**, ``Σ_{s_i ∈ bucket} s_i / Σ_i s_i`` — the memory and the linear
  (dense-layer) work;
* the share of **Σs²**, ``Σ_{s_i ∈ bucket} s_i² / Σ_i s_i²`` — the attention work, which grows
  with the square of the length (design §6, the ``a·s²`` term);
* the **tail** (``s > 8192`` by default): the same three shares above the threshold.

Worked example: lengths (100, 100, 100, 10000). The long document is 25 % of the documents,
10000 / 10300 = 97.1 % of the tokens and 10⁸ / (3·10⁴ + 10⁸) = 99.97 % of Σs².

Per step: the documents are batched as the loader does (:func:`hydraulis.data.loader.plan_epoch`:
shuffled by seed and epoch, cut to ``S``, filled to ``T``) for as many epochs as it takes to
see ``steps`` steps; for each step we record its longest sequence — what decides the parallel
layout the step needs — and its Σs², whose spread from step to step is the sampling imbalance.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from hydraulis.base.errors import require, require_int
from hydraulis.base.limits import LENGTH, SAMPLED_STEPS
from hydraulis.data.loader import LoaderConfig, document_lengths, plan_epoch

DEFAULT_BUCKET_EDGES = (128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
DEFAULT_TAIL_THRESHOLD = 8192
DEFAULT_STEPS = 1000
PERCENTILES = (10.0, 50.0, 90.0, 99.0, 99.9)


@dataclass(frozen=True)
class AnalysisConfig:
    """Token budget ``T``, maximum sequence length ``S``, how many steps to simulate, the
    shuffle seed, the tail threshold and the bucket edges (increasing, in tokens)."""

    token_budget: int
    max_seq_len: int
    steps: int = DEFAULT_STEPS
    seed: int = 0
    tail_threshold: int = DEFAULT_TAIL_THRESHOLD
    bucket_edges: tuple[int, ...] = DEFAULT_BUCKET_EDGES

    def __post_init__(self) -> None:
        LoaderConfig(self.token_budget, self.max_seq_len, self.seed)
        SAMPLED_STEPS.check(self.steps, "steps")
        LENGTH.check(self.tail_threshold, "tail_threshold")
        require(len(self.bucket_edges) > 0, "bucket_edges", self.bucket_edges, "must list at least one edge")
        for index, edge in enumerate(self.bucket_edges):
            require_int(edge, f"bucket_edges[{index}]", minimum=1)
        require(all(a < b for a, b in zip(self.bucket_edges, self.bucket_edges[1:])), "bucket_edges",
                self.bucket_edges, "must be strictly increasing")

    @property
    def loader(self) -> LoaderConfig:
        return LoaderConfig(self.token_budget, self.max_seq_len, self.seed)


@dataclass(frozen=True)
class LengthBucket:
    """Documents with ``low < s ≤ high`` (``high`` ``None``: no upper limit) and their shares."""

    low: int
    high: int | None
    documents: int
    tokens: int
    document_share: float
    token_share: float
    square_share: float

    @property
    def label(self) -> str:
        if self.low == 0:
            return f"≤{token_label(self.high)}"
        if self.high is None:
            return f">{token_label(self.low)}"
        return f"({token_label(self.low)}, {token_label(self.high)}]"


@dataclass(frozen=True)
class LengthSummary:
    """Count, total, mean, extremes and percentiles of the lengths, the buckets and the tail."""

    documents: int
    tokens: int
    mean: float
    minimum: int
    maximum: int
    percentiles: tuple[tuple[float, int], ...]
    buckets: tuple[LengthBucket, ...]
    tail_threshold: int
    tail_document_share: float
    tail_token_share: float
    tail_square_share: float


@dataclass(frozen=True, eq=False)
class StepSummary:
    """Per simulated step: the longest sequence, the number of sequences, tokens and Σs²."""

    epochs: int
    maxima: np.ndarray = field(repr=False)
    sequences: np.ndarray = field(repr=False)
    tokens: np.ndarray = field(repr=False)
    square_sums: np.ndarray = field(repr=False)

    @property
    def steps(self) -> int:
        return int(self.maxima.size)

    def maximum_percentiles(self) -> tuple[tuple[float, int], ...]:
        return _percentiles(self.maxima)

    def share_above(self, threshold: int) -> float:
        """Share of steps whose longest sequence exceeds ``threshold``."""
        return float(np.mean(self.maxima > threshold))

    def square_sum_spread(self) -> float:
        """p90 / p10 of the per-step Σs²: how unequal the steps' attention work is."""
        low, high = np.percentile(self.square_sums, (10, 90))
        return float(high / low)


@dataclass(frozen=True)
class LengthAnalysis:
    config: AnalysisConfig
    lengths: LengthSummary
    steps: StepSummary


def analyze_lengths(lengths: Sequence[int] | np.ndarray, config: AnalysisConfig) -> LengthAnalysis:
    """The length summary of ``lengths`` and its per-step summary under ``config``."""
    s = document_lengths(lengths)
    return LengthAnalysis(config, summarize_lengths(s, config), summarize_steps(s, config))


def summarize_lengths(lengths: np.ndarray, config: AnalysisConfig) -> LengthSummary:
    s = document_lengths(lengths)
    edges = (0, *config.bucket_edges)
    buckets = []
    for low, high in zip(edges, (*config.bucket_edges, None)):
        inside = (s > low) & (s <= high) if high is not None else s > low
        buckets.append(LengthBucket(low, high, int(inside.sum()), int(s[inside].sum()), *_shares(s, inside)))
    tail = _shares(s, s > config.tail_threshold)
    return LengthSummary(
        documents=int(s.size), tokens=int(s.sum()), mean=float(s.mean()), minimum=int(s.min()), maximum=int(s.max()),
        percentiles=_percentiles(s), buckets=tuple(buckets), tail_threshold=config.tail_threshold,
        tail_document_share=tail[0], tail_token_share=tail[1], tail_square_share=tail[2],
    )


def tail_shares(lengths: Sequence[int] | np.ndarray, threshold: int = DEFAULT_TAIL_THRESHOLD) -> tuple[float, float, float]:
    """Shares of documents, tokens and Σs² in documents longer than ``threshold``."""
    s = document_lengths(lengths)
    return _shares(s, s > threshold)


def summarize_steps(lengths: np.ndarray, config: AnalysisConfig) -> StepSummary:
    """The first ``config.steps`` steps the loader would produce, over as many epochs as needed."""
    batches, epoch = [], 0
    while len(batches) < config.steps:
        batches.extend(plan_epoch(lengths, config.loader, epoch).batch_lengths())
        epoch += 1
    batches = batches[:config.steps]
    return StepSummary(
        epochs=epoch,
        maxima=np.array([b.max() for b in batches], dtype=np.int64),
        sequences=np.array([b.size for b in batches], dtype=np.int64),
        tokens=np.array([b.sum() for b in batches], dtype=np.int64),
        square_sums=np.array([float((b.astype(np.float64) ** 2).sum()) for b in batches]),
    )


def _shares(s: np.ndarray, selected: np.ndarray) -> tuple[float, float, float]:
    """Shares of documents, tokens and Σs² (in float64: s² overflows int64 sums) that ``selected`` picks."""
    squares = s.astype(np.float64) ** 2
    return float(selected.mean()), float(s[selected].sum() / s.sum()), float(squares[selected].sum() / squares.sum())


def _percentiles(values: np.ndarray) -> tuple[tuple[float, int], ...]:
    """Observed values at :data:`PERCENTILES` (the inverse of the empirical distribution)."""
    found = np.percentile(values, PERCENTILES, method="inverted_cdf")
    return tuple((p, int(v)) for p, v in zip(PERCENTILES, found))


def token_label(tokens: int) -> str:
    """``8192`` → ``8K``, ``1048576`` → ``1M``, ``100`` → ``100``."""
    for unit, size in (("M", 1 << 20), ("K", 1 << 10)):
        if tokens % size == 0:
            return f"{tokens // size}{unit}"
    return str(tokens)

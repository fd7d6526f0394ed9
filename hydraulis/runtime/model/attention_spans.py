"""Which queries of a rank attend to which keys: attention spans, and the kernel calls or the
variable-length layout that run them.

A **span** is ``m`` consecutive query rows of this rank against ``n ≥ m`` consecutive keys of
one document (in the document's order), causal and aligned at the bottom right: query ``r``
(``0 ≤ r < m``) sees keys ``0 … n − m + r``. A whole document on one rank (cp = 1) is one
span with ``m = n``; under context parallelism (:mod:`hydraulis.runtime.parallel.context`) a
rank's chunk ``k`` of a document of chunks of ``c`` tokens is one span with ``m = c``,
``n = (k + 1)·c`` — the chunk against every key up to its own end. Keys are addressed by their
row in the keys this rank holds, the cp group's gathered K and V (rank-major; the rows of
every cp rank, :func:`~hydraulis.runtime.parallel.context.start_gather_from_context`).

The details: :func:`span_plan`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class Span:
    """``queries`` rows of this rank from ``query_start`` against ``keys`` key rows listed by
    ``key_rows`` (a document's keys in order, causal, bottom-right aligned)."""

    query_start: int
    queries: int
    key_rows: np.ndarray

    @property
    def keys(self) -> int:
        return int(self.key_rows.size)


@dataclass(frozen=True)
class KernelCall:
    """``parts`` parts of ``query_length × key_length`` padded rows, run as one batch:
    ``query_index[parts·query_length]`` (this rank's query rows, padding = the zero row ``T_q``),
    ``key_index[parts·key_length]`` (key rows, padding = ``T_k``), ``causal`` for diagonal parts,
    ``key_mask[parts, key_length]`` (True: a real key) for rectangles with padded keys."""

    causal: bool
    parts: int
    query_length: int
    key_length: int
    query_index: torch.Tensor
    key_index: torch.Tensor
    key_mask: torch.Tensor | None

    @property
    def work(self) -> float:
        """Score entries computed: ``parts·L_q·L_k``, half of it for a causal part."""
        return self.parts * self.query_length * self.key_length * (0.5 if self.causal else 1.0)


@dataclass(frozen=True)
class SpanPlan:
    """Dense-kernel calls over ``queries`` query rows and ``keys`` key rows; ``merged`` when a
    query row takes part in more than one call (a rectangle beside its diagonal)."""

    calls: tuple[KernelCall, ...]
    queries: int
    keys: int
    merged: bool

    @property
    def work(self) -> float:
        return sum(call.work for call in self.calls)


@dataclass(frozen=True)
class VarlenPlan:
    """One variable-length call: spans at ``cu_seqlens_q`` of the query rows, their keys
    copied through ``key_index`` (None: the key rows are the query rows, cp = 1) to
    ``cu_seqlens_k``; int32 on the device, as the kernel takes them."""

    cu_seqlens_q: torch.Tensor
    cu_seqlens_k: torch.Tensor
    key_index: torch.Tensor | None
    max_queries: int
    max_keys: int


AttentionPlan = SpanPlan | VarlenPlan


MIN_PADDED = 16
"""Shorter parts are padded to this many rows: one call for every short document."""


def padded_length(length: int) -> int:
    """``length`` rounded up to a multiple of ``2^(⌊log₂ length⌋ − 3)``, at least
    :data:`MIN_PADDED`: at most 1/8 more above it, eight sizes per octave (e.g. 5 → 16,
    17 → 18, 100 → 104, 4097 → 4608)."""
    step = 1 << max(0, length.bit_length() - 4)
    return max(MIN_PADDED, math.ceil(length / step) * step)


def span_plan(spans: Sequence[Span], queries: int, keys: int, device: torch.device) -> SpanPlan:
    """Diagonal and rectangle parts of ``spans`` grouped into calls by padded sizes.

    Two ways to run spans, built once per micro-batch when it is packed (shared by all layers):

    * :class:`VarlenPlan` — one variable-length kernel call (CUDA, ``varlen_attn``): queries stay
      in their rows (spans are consecutive), ``cu_seqlens_q`` marks them; each span's keys are
      copied out in order (``key_index``, ``Σ n`` rows — under cp a document's key rows once per
      chunk on this rank: ``(2·cp + 1)/(2·cp)`` of its length), ``cu_seqlens_k`` marks them;
    * :class:`SpanPlan` — batched calls of a dense kernel (CPU), each span cut into a
      **diagonal part** (its ``m`` queries against its last ``m`` keys, causal, square) and, when
      ``n > m``, a **rectangle part** (the same queries against the first ``n − m`` keys, all
      visible). Parts of similar sizes share a call: sizes are rounded up to :func:`padded_length`
      (at most 1/8 more) and the rows padded with a zero row. Padded keys sit after a diagonal
      part's real keys, where causality hides them; a rectangle's are masked (``key_mask``). The
      calls' outputs are merged per query row by their log-sum-exp
      (:mod:`hydraulis.runtime.model.attention`).

    Everything here is linear in the tokens: index vectors of the padded parts, a key mask of
    ``parts × keys`` entries per rectangle call; no ``queries × keys`` tensor.

    Worked example, cp = 1, documents of 18 and 17 tokens: spans of rows 0–17 (keys 0–17) and
    18–34 (keys 18–34); both diagonal parts are padded to 18 and share one call, query rows
    ``[0 … 17 | 18 … 34 ∅]``, key rows the same. Under cp = 2 a document of 8 tokens (chunks of 2)
    on rank 0 holds chunks 0 and 3 as its rows 0–1 and 2–3: spans of 2 queries against keys
    0–1, and of 2 queries against keys 0–7 — three parts: two diagonals (one call of two 16-row
    parts) and the rectangle of chunk 3's queries against the 6 keys of chunks 0–2.
    """
    groups: dict[tuple[bool, int, int], list[tuple[int, int, np.ndarray]]] = {}
    for span in spans:
        diagonal = span.key_rows[span.keys - span.queries:]
        groups.setdefault((True, padded_length(span.queries), padded_length(span.queries)), []).append(
            (span.query_start, span.queries, diagonal))
        if span.keys > span.queries:
            before = span.key_rows[:span.keys - span.queries]
            groups.setdefault((False, padded_length(span.queries), padded_length(before.size)), []).append(
                (span.query_start, span.queries, before))
    calls = tuple(_call(causal, q_length, k_length, parts, queries, keys, device)
                  for (causal, q_length, k_length), parts in sorted(groups.items()))
    merged = any(s.keys > s.queries for s in spans)
    return SpanPlan(calls, queries, keys, merged)


def _call(causal: bool, query_length: int, key_length: int, parts: list[tuple[int, int, np.ndarray]],
          queries: int, keys: int, device: torch.device) -> KernelCall:
    query_index = np.full((len(parts), query_length), queries, dtype=np.int64)
    key_index = np.full((len(parts), key_length), keys, dtype=np.int64)
    for p, (start, count, key_rows) in enumerate(parts):
        query_index[p, :count] = np.arange(start, start + count)
        key_index[p, :key_rows.size] = key_rows
    padded_keys = key_index == keys
    mask = None if causal or not padded_keys.any() else to_device(torch.from_numpy(~padded_keys), device)
    return KernelCall(causal, len(parts), query_length, key_length,
                      to_device(torch.from_numpy(query_index.ravel()), device),
                      to_device(torch.from_numpy(key_index.ravel()), device), mask)


def varlen_plan(spans: Sequence[Span], queries: int, device: torch.device) -> VarlenPlan:
    """The variable-length layout of ``spans`` (consecutive query rows, in order)."""
    cu_q = np.cumsum([0] + [s.queries for s in spans])
    cu_k = np.cumsum([0] + [s.keys for s in spans])
    key_rows = np.concatenate([s.key_rows for s in spans])
    identity = cu_q[-1] == queries and key_rows.size == queries and np.array_equal(key_rows, np.arange(queries))
    key_index = None if identity else to_device(torch.from_numpy(key_rows), device)
    return VarlenPlan(to_device(torch.from_numpy(cu_q).to(torch.int32), device),
                      to_device(torch.from_numpy(cu_k).to(torch.int32), device),
                      key_index, max(s.queries for s in spans), max(s.keys for s in spans))


def document_plan(bounds: Sequence[int], device: torch.device) -> VarlenPlan:
    """:func:`varlen_plan` of whole documents at ``bounds`` (cp = 1: every document one span,
    its queries its keys), from the bounds alone."""
    starts = torch.tensor(bounds, dtype=torch.int32)
    longest = int(np.diff(np.asarray(bounds)).max())
    cu_seqlens = to_device(starts, device)
    return VarlenPlan(cu_seqlens, cu_seqlens, None, longest, longest)


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host tensor on ``device`` without the host waiting for the device's queue: on CUDA
    through pinned memory and an asynchronous copy (a copy from pageable memory would first
    synchronise the stream)."""
    if device.type != "cuda":
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)

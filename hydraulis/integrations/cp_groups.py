"""Hybrid context-parallel groups planned by dispatch, and the step time of any such plan.

**The format** (Megatron-Core's ``get_groups_and_subsamples``): ``groups[g][r]`` lists the
samples DP×CP rank ``r`` runs in group ``g``, in order; a sample listed on ``k`` ranks of a group
runs with context-parallel size ``k`` on them, and the ranks meet at a barrier after each group.

**Cost** (design §6.1 per rank, the barrier between groups):

    T = Σ_g max_r Σ_{i ∈ groups[g][r]} t_{k_i}(s_i),       t_k(s) = c_k + a_k·s² + b_k·s

The details: :func:`plan_cp_groups`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np

from hydraulis.dispatch.assign import assign_pieces
from hydraulis.dispatch.options import DispatchOptions
from hydraulis.dispatch.pipelines import PipelineTable
from hydraulis.errors import HydraulisError, require, require_int
from hydraulis.integrations.cp_ranks import CPRanks
from hydraulis.planner.search import CountsSearch
from hydraulis.scheme_profile import time_ms
from hydraulis.types import PipelineModel

SEARCH_EVALUATIONS = 48
"""Counts judged per step beyond the starts (each one stage-1 assignment)."""


class FixedCost(str, Enum):
    """Where the fixed cost ``c`` of :func:`plan_cp_groups` is paid."""

    SUBSAMPLE = "subsample"
    GROUP = "group"


@dataclass(frozen=True)
class CPGroups:
    """``groups[g][r]``: the sample indices rank ``r`` runs in group ``g``, in order."""

    groups: tuple[tuple[tuple[int, ...], ...], ...]

    def __post_init__(self) -> None:
        require(len(self.groups) > 0, "groups", [], "must hold at least one group")
        ranks = len(self.groups[0])
        for g, group in enumerate(self.groups):
            require(len(group) == ranks, f"groups[{g}]", len(group), f"must list {ranks} ranks")

    @property
    def ranks(self) -> int:
        return len(self.groups[0])

    def holders(self, g: int) -> dict[int, list[int]]:
        """Sample → the ranks that list it in group ``g`` (ascending)."""
        found: dict[int, list[int]] = {}
        for r, samples in enumerate(self.groups[g]):
            for i in samples:
                found.setdefault(i, []).append(r)
        return found


def cp_step_ms(plan: CPGroups, lengths: Sequence[int] | np.ndarray, ranks: CPRanks,
               fixed: FixedCost = FixedCost.SUBSAMPLE) -> float:
    """``T`` of :func:`plan_cp_groups`; every sample's ``k`` must be an option of ``ranks``."""
    lengths = np.asarray(lengths, dtype=np.int64)
    total = 0.0
    for g, group in enumerate(plan.groups):
        cp = {i: len(r) for i, r in plan.holders(g).items()}
        slowest = 0.0
        for samples in group:
            options = [ranks.option(cp[i]) for i in samples]
            work = sum(o.ms(int(lengths[i])) - o.time.c for o, i in zip(options, samples))
            if fixed is FixedCost.SUBSAMPLE:
                work += sum(o.time.c for o in options)
            elif options:
                work += max(o.time.c for o in options)
            slowest = max(slowest, work)
        total += slowest
    return total


def plan_cp_groups(ranks: CPRanks, lengths: Sequence[int] | np.ndarray,
                   max_evaluations: int = SEARCH_EVALUATIONS) -> CPGroups:
    """One group of :func:`plan_cp_groups` for samples of ``lengths`` (index = sample).

    — the fixed cost ``c`` once per sub-sample, as Megatron's schedule runs them (``fixed =
    subsample``), or once per rank and group (``fixed = group``: ``max_r (c + Σ_i w_{k_i}(s_i))``).
    Worked example: one group, rank 0 runs a 4K sample alone, ranks 1–2 share an 8K one (``k = 2``):
    ``T = max(t_1(4K), t_2(8K))``.

    **Planning** (:func:`plan_cp_groups`): one group, so no barrier is paid, whose ranks form blocks
    of ``k`` consecutive ranks (blocks in decreasing ``k`` from rank 0, so a block of ``k`` starts at
    a multiple of ``k``, the aligned groups Megatron creates). A block of ``k`` ranks is a one-stage
    pipeline of scheme ``(k, tp, 1)`` whose micro-batches are single samples, so its time is exactly
    ``Σ_i t_k(s_i)``: dispatch stage 1 (:func:`~hydraulis.dispatch.assign.assign_pieces`, longest
    first to the block that would finish first, capacity classes, then moves off the slowest block)
    with the work ``w_k(s) + c_k`` per sample gives every block its samples. Which blocks — the
    counts ``n_k`` with ``Σ_k k·n_k = n`` — is searched by the planner's pattern search
    (:class:`~hydraulis.planner.search.CountsSearch`) under that exact time, from the homogeneous
    counts that hold the longest sample and from the *demand* counts: with ``k_i`` the smallest
    option holding sample ``i``, ``D_k = Σ_{i: k_i = k} k·t_k(s_i)`` and ``T₀ = Σ_k D_k/n``,
    ``n_k = ⌈D_k/(k·T₀)⌉`` for the larger ``k`` and the rest of the ranks in blocks of the smallest.
    Counts that leave a block without a sample are out (every rank must run at least one sample).
    Only the step's useful sizes are searched (:meth:`~hydraulis.integrations.cp_ranks.CPRanks.useful`:
    up to the first ``k`` on which the longest sample takes no longer than the mean rank load).
    """
    require_int(max_evaluations, "max_evaluations", minimum=0)
    lengths = np.asarray(lengths, dtype=np.int64).reshape(-1)
    ranks.check_lengths(lengths)
    ranks = ranks.useful(lengths)
    planner = _BlockPlanner(ranks, lengths)
    search = CountsSearch([o.cp for o in ranks.options], ranks.ranks, range(len(ranks.options)),
                          planner.makespan, max_evaluations)
    starts = planner.starts()
    feasible = [s for s in starts if math.isfinite(search.judge(s))]
    most = max(o.cp for o in ranks.options)
    if not feasible:
        raise HydraulisError("sample_id_seqlens", f"{lengths.size} samples",
                             f"cannot give each of the {ranks.ranks} ranks a sample with context-parallel "
                             f"sizes up to {most}: give at least {ranks.ranks // most}")
    best = min((search.descend(s) for s in feasible), key=lambda d: d.mean_ms).counts
    return planner.groups(best)


class _BlockPlanner:
    """Stage 1 of :func:`plan_cp_groups` on counts of blocks."""

    def __init__(self, ranks: CPRanks, lengths: np.ndarray) -> None:
        self.ranks = ranks
        self.order = np.argsort(-lengths, kind="stable")
        self.tokens = lengths[self.order]
        self.sizes = np.array([o.cp for o in ranks.options], dtype=np.int64)
        self.capacity = np.array([o.capacity for o in ranks.options], dtype=np.int64)
        self.a = np.array([o.time.a for o in ranks.options])
        self.b = np.array([o.time.b for o in ranks.options])
        self.c = np.array([o.time.c for o in ranks.options])
        self.options = DispatchOptions()

    def full(self, counts: Sequence[int]) -> np.ndarray:
        """``counts`` with the idle ranks in blocks of the smallest size."""
        full = np.asarray(counts, dtype=np.int64).copy()
        full[0] += (self.ranks.ranks - int(full @ self.sizes)) // self.sizes[0]
        return full

    def assign(self, counts: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Per block its option, its pieces' owner and its time; None when the longest piece fits no block."""
        full = self.full(counts)
        used = np.flatnonzero(full > 0)
        if self.capacity[used].max() < self.tokens[0]:
            return None
        table = PipelineTable(a=self.a[used], b=self.b[used], c=np.zeros(used.size), pp=np.ones(used.size, np.int64),
                              capacity=self.capacity[used], devices=self.sizes[used],
                              group_of=np.repeat(np.arange(used.size), full[used]), model=PipelineModel())
        work = table.work(self.tokens) + self.c[used][:, None]
        owner = assign_pieces(table, self.tokens, work, self.options.bubble_factor, self.options.local_moves)
        times = np.bincount(owner, weights=work[table.group_of[owner], np.arange(owner.size)],
                            minlength=table.pipelines)
        return used[table.group_of], owner, times

    def makespan(self, counts: tuple[int, ...]) -> float:
        """The slowest block's time; ∞ when a block gets no sample or the longest fits none."""
        assigned = self.assign(counts)
        if assigned is None:
            return math.inf
        _, owner, times = assigned
        return float(times.max()) if np.bincount(owner, minlength=times.size).min() > 0 else math.inf

    def starts(self) -> list[tuple[int, ...]]:
        """The homogeneous counts holding the longest sample, and the demand counts."""
        n, sizes = self.ranks.ranks, self.sizes.tolist()
        starts = [tuple(n // k if j == i else 0 for j in range(len(sizes)))
                  for i, k in enumerate(sizes) if self.capacity[i] >= self.tokens[0]]
        needs = np.searchsorted(np.maximum.accumulate(self.capacity), self.tokens)
        ms = time_ms(self.a[needs], self.b[needs], self.c[needs], self.tokens ** 2.0, self.tokens)
        demand = np.bincount(needs, weights=self.sizes[needs] * ms, minlength=len(sizes))
        level = max(demand.sum() / n, float(ms.max()))
        counts, left = [0] * len(sizes), n
        for i in range(len(sizes) - 1, 0, -1):
            counts[i] = min(math.ceil(demand[i] / (sizes[i] * level)), left // sizes[i])
            left -= counts[i] * sizes[i]
        counts[0] = left // sizes[0]
        return list(dict.fromkeys([*starts, tuple(counts)]))

    def groups(self, counts: tuple[int, ...]) -> CPGroups:
        """The plan of ``counts``: blocks in decreasing size from rank 0, each rank its block's samples."""
        option_of, owner, _ = self.assign(counts)
        samples: list[list[int]] = [[] for _ in option_of]
        for k, p in enumerate(owner.tolist()):
            samples[p].append(int(self.order[k]))
        ranks: list[tuple[int, ...]] = []
        for p in sorted(range(len(option_of)), key=lambda p: (-self.sizes[option_of[p]], p)):
            ranks.extend([tuple(samples[p])] * int(self.sizes[option_of[p]]))
        return CPGroups((tuple(ranks),))

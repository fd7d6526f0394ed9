"""A step of hybrid context parallelism planned as a sequence of groups (docs/integrations.md).

A group partitions the ``n`` DP×CP ranks into aligned blocks of power-of-two ``k`` ranks, each
running its samples one after another with CP size ``k``; the step lasts ``Σ_g max_block
Σ_i t_k(s_i)`` (:func:`~hydraulis.integrations.cp_groups.cp_step_ms`). The program:

1. each sample's *need* ``k_i``, the smallest option holding it;
2. the needs present, widest first, cut into runs of consecutive needs, one group per run; the
   ``CUTS`` cuts of least ``Σ_g E_g`` are planned, ``E_g = min(Σ_i t_n(s_i), max(Σ_i
   k_i·t_{k_i}(s_i)/n, max_i t_{k_i}(s_i)))`` (all on one block of ``n``, or the fluid time);
3. a group's blocks: the longest sample at the width ``k`` least bounding the group,
   ``max(t_k(s_ℓ), L + (k·t_k(s_ℓ) − k_ℓ·t_{k_ℓ}(s_ℓ))/n)`` (``L`` the fluid level), counts from
   the demand, then a descent splitting/merging one block; samples dealt longest first to the
   block that would finish first among those holding them;
4. each cut's last group (the narrowest, where every rank must run a sample) gives its samples,
   longest first, to the idle time of the earlier groups' blocks; the rest is replanned;
5. the *layers* (:meth:`_Step.layers`): samples by need (widest first), then time; a group's time
   ``T`` is its first sample's, and each sample joins the fullest block of its need ending by ``T``,
   else opens one on free ranks, else joins the fullest wider block ending by ``T``, else waits;
   the narrowest-need samples left form the last group (step 3). The cheapest of 2–5 is the plan.
The loops of steps 3–5 are compiled (:mod:`~hydraulis.integrations.cp_kernels`).
Worked example: docs/integrations.md ("Several groups per step").
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from hydraulis.base.errors import HydraulisError, require_int
from hydraulis.base.scheme_profile import time_ms
from hydraulis.integrations import cp_kernels
from hydraulis.integrations.cp_groups import CPGroups
from hydraulis.integrations.cp_ranks import CPRanks

COUNT_MOVES = 3
"""Block counts judged per group beyond the demand start (each one deal of the group's samples)."""

CUTS = 2
"""Cuts of the needs into groups planned per step, the best by summed estimate; each is a candidate."""


def plan_cp_groups(ranks: CPRanks, lengths, max_moves: int = COUNT_MOVES, cuts: int = CUTS) -> CPGroups:
    """The groups of the module docstring for samples of ``lengths`` (index = sample)."""
    require_int(max_moves, "max_moves", minimum=0)
    require_int(cuts, "cuts", minimum=1)
    lengths = np.asarray(lengths, dtype=np.int64).reshape(-1)
    ranks.check_lengths(lengths)
    step = _Step.of(ranks, lengths)
    planned: dict[tuple[bytes, bool], _Group] = {}
    candidates = [step.layers(max_moves)]
    for cut in step.cuts(cuts):
        runs = step.feasible_last(cut)
        groups = []
        for g, run in enumerate(runs):
            key = (np.sort(run).tobytes(), g == len(runs) - 1)
            if key not in planned:
                planned[key] = step.group(run, key[1], max_moves)
            groups.append(planned[key])
        candidates.append(groups)
        filled = step.backfill(groups, max_moves) if len(groups) > 1 else None
        if filled is not None:
            candidates.append(filled)
    best = min(candidates, key=lambda found: sum(g.ms for g in found))
    return CPGroups(tuple(group.ranks() for group in best))


class _Group:
    """A planned group: its time ``ms``, its blocks' sizes in rank order from rank 0, its samples
    and each one's block; the blocks ``(k, samples)`` are built only when asked (most planned
    groups are not chosen)."""

    def __init__(self, ms: float, sizes: np.ndarray, samples: np.ndarray, block: np.ndarray) -> None:
        self.ms, self.sizes, self.samples, self.block = ms, sizes, samples, block

    @cached_property
    def blocks(self) -> tuple[tuple[int, tuple[int, ...]], ...]:
        members: list[list[int]] = [[] for _ in range(self.sizes.size)]
        for i, b in zip(self.samples.tolist(), self.block.tolist()):
            members[b].append(i)
        return tuple((size, tuple(found)) for size, found in zip(self.sizes.tolist(), members))

    def ranks(self) -> tuple[tuple[int, ...], ...]:
        return tuple(samples for size, samples in self.blocks for _ in range(size))


@dataclass(frozen=True)
class _Step:
    """One step's samples against the options: ``ms[j, i] = t_j(s_i)``, ``fits[j, i]``, ``need[i]``."""

    ranks: CPRanks
    lengths: np.ndarray
    ms: np.ndarray
    fits: np.ndarray
    need: np.ndarray
    cp: np.ndarray
    n: int

    @classmethod
    def of(cls, ranks: CPRanks, lengths: np.ndarray) -> _Step:
        a, b, c = (np.array([getattr(o.time, f) for o in ranks.options])[:, None] for f in "abc")
        s = lengths.astype(float)[None, :]
        fits = np.array([o.capacity for o in ranks.options])[:, None] >= lengths[None, :]
        return cls(ranks, lengths, time_ms(a, b, c, s * s, s), fits, fits.argmax(axis=0),
                   np.array([o.cp for o in ranks.options], dtype=np.int64), ranks.ranks)

    def cuts(self, keep: int) -> list[list[np.ndarray]]:
        """Step 2: the ``keep`` cuts of the needs present (widest first) into runs with the least
        summed estimate (a run's estimate from its needs' sums)."""
        size = self.cp.size
        own = self.ms[self.need, np.arange(self.need.size)]
        counts = np.bincount(self.need, minlength=size)
        present = [j for j in range(size - 1, -1, -1) if counts[j]]
        summed = np.bincount(self.need, weights=own, minlength=size)
        peaks = np.zeros(size)
        np.maximum.at(peaks, self.need, own)
        alone = np.bincount(self.need, weights=self.ms[-1], minlength=size)
        work = [float(self.cp[j] * summed[j]) for j in present]
        longest = [float(peaks[j]) for j in present]
        whole = [float(alone[j]) if self.cp[-1] == self.n else math.inf for j in present]
        estimates = {}
        for start in range(len(present)):
            fluid = math.inf if self.cp[present[start]] == self.n else 0.0
            for end in range(start + 1, len(present) + 1):
                fluid = max(fluid, sum(work[start:end]) / self.n, longest[end - 1])
                estimates[start, end] = min(fluid, sum(whole[start:end]))
        scored = []
        for mask in range(2 ** (len(present) - 1)):
            bounds = [0, *(x + 1 for x in range(len(present) - 1) if mask >> x & 1), len(present)]
            runs = list(itertools.pairwise(bounds))
            scored.append((sum(estimates[r] for r in runs), runs))
        scored.sort(key=lambda found: found[0])
        members = [np.flatnonzero(self.need == j) for j in present]
        return [[np.concatenate(members[start:end]) for start, end in runs] for _, runs in scored[:keep]]

    def feasible_last(self, runs: list[np.ndarray]) -> list[np.ndarray]:
        """``runs`` with the last ones merged until the last can give every rank a sample."""
        fewest = self.n // int(self.cp[-1])
        while len(runs) > 1 and runs[-1].size < fewest:
            runs = [*runs[:-2], np.concatenate(runs[-2:])]
        if runs[-1].size < fewest:
            raise HydraulisError("sample_id_seqlens", f"{self.lengths.size} samples",
                                 f"cannot give each of the {self.n} ranks a sample with context-parallel "
                                 f"sizes up to {int(self.cp[-1])}: give at least {fewest}")
        return runs

    def group(self, samples: np.ndarray, last: bool, max_moves: int) -> _Group:
        """Step 3: the group running ``samples`` (:func:`~hydraulis.integrations.cp_kernels.group`)."""
        samples = samples[np.argsort(-self.lengths[samples], kind="stable")]
        makespan, lo, counts, block = cp_kernels.group(self.ms, self.fits, self.need, self.cp, self.n, samples,
                                                       last, max_moves)
        if not math.isfinite(makespan):
            empty = np.zeros(0, dtype=np.int64)
            return _Group(math.inf, empty, empty, empty)
        sizes = np.repeat(self.cp[lo:lo + counts.size][::-1], counts[::-1])
        return _Group(float(makespan), sizes, samples, block)

    def backfill(self, groups: list[_Group], max_moves: int) -> list[_Group] | None:
        """Step 4: the last group's samples moved, longest first, into the idle time of the earlier
        groups' blocks (each block up to its group's time, which is kept;
        :func:`~hydraulis.integrations.cp_kernels.backfill`), the rest replanned; None when too
        few would be left for the last group."""
        last = groups[-1].samples
        pool = last[np.lexsort((last, self.lengths[last]))]
        earlier = groups[:-1]
        option = [np.searchsorted(self.cp, g.sizes) for g in earlier]
        slack = [g.ms - np.bincount(g.block, weights=self.ms[o[g.block], g.samples], minlength=o.size)
                 for g, o in zip(earlier, option)]
        taken, block = cp_kernels.backfill(self.ms, self.fits, np.concatenate(option), np.concatenate(slack), pool)
        if pool.size - taken.size < self.n // int(self.cp[-1]):
            return None
        first = np.cumsum([0, *(o.size for o in option)])
        owner = np.searchsorted(first, block, side="right") - 1
        filled = [_Group(g.ms, g.sizes, np.concatenate([g.samples, pool[taken[owner == x]]]),
                         np.concatenate([g.block, block[owner == x] - first[x]]))
                  for x, g in enumerate(earlier)]
        rest = np.delete(pool, taken)
        return [*filled, self.group(rest, True, max_moves)]

    def layers(self, max_moves: int) -> list[_Group]:
        """Step 5: groups filled to the time of their first sample (widest need, then longest),
        the narrowest-need samples left for a last group (at least ``n/k_max`` samples: the last filled
        groups rejoin it until it has them)."""
        own = self.ms[self.need, np.arange(self.need.size)]
        pool = np.lexsort((-own, -self.need)).tolist()
        groups: list[_Group] = []
        while pool and self.need[pool[0]] > 0:
            group, pool = self._fill(pool)
            groups.append(group)
        last = [int(i) for i in pool]
        fewest = self.n // int(self.cp[-1])
        while groups and len(last) < fewest:
            last += groups.pop().samples.tolist()
        return [*groups, self.group(np.array(sorted(last), dtype=np.int64), True, max_moves)]

    def _fill(self, pool: list[int]) -> tuple[_Group, list[int]]:
        """One group of :meth:`layers` (:func:`~hydraulis.integrations.cp_kernels.fill`) and the
        samples left for later groups."""
        order = np.array(pool, dtype=np.int64)
        ms, block, size = cp_kernels.fill(self.ms, self.fits, self.need, self.cp, self.n, order)
        widest_first = np.argsort(-size, kind="stable")
        position = np.empty_like(widest_first)
        position[widest_first] = np.arange(widest_first.size)
        placed = block >= 0
        free = self.n - int(self.cp[size].sum())
        sizes = np.concatenate([self.cp[size[widest_first]], np.ones(free, dtype=np.int64)])
        return _Group(float(ms), sizes, order[placed], position[block[placed]]), order[~placed].tolist()

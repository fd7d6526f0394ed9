"""A step of hybrid context parallelism planned as a sequence of groups (docs/integrations.md).

A group partitions the ``n`` DP×CP ranks into aligned blocks of power-of-two ``k`` ranks, each
running its samples one after another with CP size ``k``; the step lasts ``Σ_g max_block
Σ_i t_k(s_i)`` (:func:`~hydraulis.integrations.cp_groups.cp_step_ms`). The program:

1. each sample's *need* ``k_i``, the smallest option holding it;
2. the needs present, widest first, cut into runs of consecutive needs, one group per run; the
   ``CUTS`` cuts of least ``Σ_g E_g`` are planned, ``E_g = min(Σ_i t_n(s_i), max(Σ_i
   k_i·t_{k_i}(s_i)/n, max_i t_{k_i}(s_i)))`` (all on one block of ``n``, or the fluid time);
3. a group's blocks: counts from the demand, then a descent splitting/merging one block; samples
   dealt longest first to the block that would finish first among those holding them;
4. the cheapest plan's last group (the narrowest, where every rank must run a sample) gives its
   samples, longest first, to the idle time of the earlier groups' blocks; the rest is replanned;
5. the *layers* (:meth:`_Step.layers`): samples by need (widest first), then time; a group's time
   ``T`` is its first sample's, and each sample joins the fullest block of its need ending by ``T``,
   else opens one on free ranks, else joins the fullest wider block ending by ``T``, else waits;
   the narrowest-need samples left form the last group (step 3). The cheaper of 2–4 and 5 is the plan.
The loops of steps 3 and 5 are compiled (:mod:`~hydraulis.integrations.cp_kernels`).
Worked example: docs/integrations.md ("Several groups per step").
"""

from __future__ import annotations

import bisect
import itertools
import math
from dataclasses import dataclass

import numpy as np

from hydraulis.base.errors import HydraulisError, require_int
from hydraulis.base.scheme_profile import time_ms
from hydraulis.integrations import cp_kernels
from hydraulis.integrations.cp_groups import CPGroups
from hydraulis.integrations.cp_ranks import CPRanks

COUNT_MOVES = 3
"""Block counts judged per group beyond the demand start (each one deal of the group's samples)."""

CUTS = 2
"""Cuts of the needs into groups planned per step, the best by summed estimate; the cheaper plan wins."""

Counts = tuple[int, ...]


def plan_cp_groups(ranks: CPRanks, lengths, max_moves: int = COUNT_MOVES, cuts: int = CUTS) -> CPGroups:
    """The groups of the module docstring for samples of ``lengths`` (index = sample)."""
    require_int(max_moves, "max_moves", minimum=0)
    require_int(cuts, "cuts", minimum=1)
    lengths = np.asarray(lengths, dtype=np.int64).reshape(-1)
    ranks.check_lengths(lengths)
    step = _Step.of(ranks, lengths)
    planned: dict[tuple[bytes, bool], _Group] = {}
    best: tuple[float, list[_Group]] = (math.inf, [])
    for cut in step.cuts(cuts):
        runs = step.feasible_last(cut)
        groups = []
        for g, run in enumerate(runs):
            key = (np.sort(run).tobytes(), g == len(runs) - 1)
            if key not in planned:
                planned[key] = step.group(run, key[1], max_moves)
            groups.append(planned[key])
        total = sum(group.ms for group in groups)
        if total < best[0]:
            best = (total, groups)
    groups = best[1]
    if len(groups) > 1:
        filled = step.backfill(groups, max_moves)
        if filled is not None and sum(g.ms for g in filled) < best[0]:
            groups, best = filled, (sum(g.ms for g in filled), filled)
    layered = step.layers(max_moves)
    if sum(g.ms for g in layered) < best[0]:
        groups = layered
    return CPGroups(tuple(group.ranks() for group in groups))


@dataclass(frozen=True)
class _Group:
    """A planned group: its time and its blocks ``(k, samples)`` in rank order from rank 0."""

    ms: float
    blocks: tuple[tuple[int, tuple[int, ...]], ...]

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

    def fluid(self, samples: np.ndarray) -> float:
        """``max(Σ_i k_i·t_{k_i}(s_i)/n, t_{k_max}(s_max))``."""
        need = self.need[samples]
        if self.cp[need.max()] == self.n:
            return math.inf
        own = self.ms[need, samples]
        return max(float((self.cp[need] * own).sum()) / self.n, float(own.max()))

    def whole(self, samples: np.ndarray) -> float:
        """``Σ_i t_n(s_i)``: every sample on one block of all ``n`` ranks (∞ without that option)."""
        return float(self.ms[-1, samples].sum()) if self.cp[-1] == self.n else math.inf

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
        """Step 3: the group running ``samples``."""
        samples = samples[np.argsort(-self.lengths[samples], kind="stable")]
        whole = self.whole(samples)
        if whole <= self.fluid(samples):
            return _Group(whole, ((self.n, tuple(int(i) for i in samples)),))
        deal = _Deal(self, samples, last, self.useful(samples))
        counts = deal.descend(deal.demand(), max_moves)
        if not math.isfinite(deal.makespan(counts)):
            deal = _Deal(self, samples, last, self.cp.size - 1)
            counts = (0,) * (deal.hi - deal.lo) + (self.n // int(self.cp[-1]),)
        return _Group(deal.makespan(counts), deal.place(counts))

    def backfill(self, groups: list[_Group], max_moves: int) -> list[_Group] | None:
        """Step 4: the last group's samples moved, longest first, into the idle time of the earlier
        groups' blocks (each block up to its group's time, which is kept), the rest replanned;
        None when too few would be left for the last group."""
        pool = sorted({i for _, samples in groups[-1].blocks for i in samples}, key=lambda i: self.lengths[i])
        option = {int(k): j for j, k in enumerate(self.cp.tolist())}
        filled = []
        for group in groups[:-1]:
            blocks = []
            for size, samples in group.blocks:
                j = option[size]
                ms, fits = self.ms[j], self.fits[j]
                slack = group.ms - float(ms[list(samples)].sum()) if samples else group.ms
                taken = list(samples)
                while pool:
                    at = bisect.bisect_right(pool, slack, key=lambda i: ms[i]) - 1
                    while at >= 0 and not fits[pool[at]]:
                        at -= 1
                    if at < 0:
                        break
                    slack -= float(ms[pool[at]])
                    taken.append(pool.pop(at))
                blocks.append((size, tuple(taken)))
            filled.append(_Group(group.ms, tuple(blocks)))
        if len(pool) < self.n // int(self.cp[-1]):
            return None
        return [*filled, self.group(np.array(pool, dtype=np.int64), True, max_moves)]

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
            last += [i for _, samples in groups.pop().blocks for i in samples]
        return [*groups, self.group(np.array(sorted(last), dtype=np.int64), True, max_moves)]

    def _fill(self, pool: list[int]) -> tuple[_Group, list[int]]:
        """One group of :meth:`layers` (:func:`~hydraulis.integrations.cp_kernels.fill`) and the
        samples left for later groups."""
        order = np.array(pool, dtype=np.int64)
        ms, block, size = cp_kernels.fill(self.ms, self.fits, self.need, self.cp, self.n, order)
        members: list[list[int]] = [[] for _ in range(size.size)]
        for i, b in zip(pool, block.tolist()):
            if b >= 0:
                members[b].append(i)
        ordered = sorted(zip(size.tolist(), members), key=lambda found: -found[0])
        free = self.n - int(self.cp[size].sum())
        return (_Group(float(ms), tuple((int(self.cp[j]), tuple(samples)) for j, samples in ordered)
                       + ((1, ()),) * free),
                [i for i, b in zip(pool, block.tolist()) if b < 0])

    def useful(self, samples: np.ndarray) -> int:
        """The widest option a mixed group needs: the first from the widest need on which the
        longest sample takes no longer than the mean load, below ``n``: wider blocks only add cost."""
        need = self.need[samples]
        top = self.cp.size - (2 if self.cp[-1] == self.n else 1)
        level = float((self.cp[need] * self.ms[need, samples]).sum()) / self.n
        widest, longest = int(need.max()), int(samples[0])
        return next((j for j in range(widest, top + 1) if self.ms[j, longest] <= level), max(widest, top))


class _Deal:
    """A group's samples dealt to blocks of given counts (longest first, earliest finish)."""

    def __init__(self, step: _Step, samples: np.ndarray, last: bool, hi: int) -> None:
        self.step, self.samples, self.last = step, samples, last
        self.lo, self.hi = int(step.need[samples].min()), hi
        self.judged: dict[Counts, tuple[float, list[list[int]]]] = {}

    def demand(self) -> Counts:
        """Counts from the demand: ``n_k = ⌈D_k/(k·T)⌉`` for the wider sizes, the rest in the narrowest."""
        step, js = self.step, range(self.lo, self.hi + 1)
        need = np.maximum(step.need[self.samples], self.lo)
        need[0] = max(need[0], self.hi)
        own = step.ms[need, self.samples]
        demand = np.bincount(need - self.lo, weights=step.cp[need] * own, minlength=len(js))
        level = max(demand.sum() / step.n, float(own.max()))
        counts, left = [0] * len(js), step.n
        for x in range(len(js) - 1, 0, -1):
            k = int(step.cp[self.lo + x])
            counts[x] = min(math.ceil(demand[x] / (k * level)), left // k)
            left -= counts[x] * k
        counts[0] = left // int(step.cp[self.lo])
        return tuple(counts)

    def makespan(self, counts: Counts) -> float:
        """The slowest block's time; ∞ when a sample fits no block, or a block of the last group is empty."""
        if counts not in self.judged:
            self.judged[counts] = self._deal(counts)
        return self.judged[counts][0]

    def _deal(self, counts: Counts) -> tuple[float, list[list[int]]]:
        found = np.asarray(counts, dtype=np.int64)
        makespan, block = cp_kernels.deal(self.step.ms, self.step.fits, self.samples, found, self.lo, self.last)
        if not math.isfinite(makespan):
            return math.inf, []
        blocks: list[list[int]] = [[] for _ in range(int(found.sum()))]
        for i, b in zip(self.samples.tolist(), block.tolist()):
            blocks[b].append(i)
        return float(makespan), blocks

    def descend(self, counts: Counts, max_moves: int) -> Counts:
        """Split one block into narrower ones or merge narrower ones into one while that helps."""
        best = self.makespan(counts)
        while len(self.judged) <= max_moves:
            moves = [m for m in self._neighbours(counts) if m not in self.judged][:max_moves + 1 - len(self.judged)]
            if not moves:
                break
            found = min(moves, key=self.makespan)
            if self.makespan(found) >= best:
                break
            counts, best = found, self.makespan(found)
        return counts

    def _neighbours(self, counts: Counts) -> list[Counts]:
        found = []
        for x in range(len(counts) - 1):
            ratio = int(self.step.cp[self.lo + x + 1] // self.step.cp[self.lo + x])
            if counts[x + 1]:
                found.append(_shift(counts, x, ratio, x + 1, -1))
            if counts[x] >= ratio:
                found.append(_shift(counts, x, -ratio, x + 1, 1))
        return found

    def place(self, counts: Counts) -> tuple[tuple[int, tuple[int, ...]], ...]:
        """Blocks in decreasing size from rank 0 (so a block of ``k`` starts at a multiple of ``k``)."""
        self.makespan(counts)
        sizes = [int(self.step.cp[self.lo + x]) for x in range(len(counts) - 1, -1, -1) for _ in range(counts[x])]
        return tuple((size, tuple(samples)) for size, samples in zip(sizes, self.judged[counts][1]))


def _shift(counts: Counts, x: int, dx: int, y: int, dy: int) -> Counts:
    shifted = list(counts)
    shifted[x] += dx
    shifted[y] += dy
    return tuple(shifted)

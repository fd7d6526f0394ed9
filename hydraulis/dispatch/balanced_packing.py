"""Stage 2: one pipeline's pieces → micro-batches in an order that minimises its 1F1B time.

**One stage** (``p = 1``): ``T = Σ_j (c + W_j) = W + v·c``, so the fewest micro-batches win;
first-fit decreasing, optimal when it reaches ``v = ⌈n/C⌉``.

**Several stages.** Under 1F1B with micro-batch times ``t_1 … t_v`` the exact time is about
``Σ_j t_j + (p − 1)·(fill and drain)``; the fill/drain shrinks when micro-batches are small at
both ends and large in the middle (with ``p = 2``, φ = 1/3 the last stage stalls by
``φ·t_{j+1} + (1 − φ)·t_{j−1} − t_j`` whenever that is positive, so times may rise freely but
must fall gently), while every extra micro-batch costs ``c``. Candidates:

* ``v`` around the estimate's ``v* = √(κ·(p − 1)·W/c)`` (:mod:`hydraulis.dispatch.estimate`),
  from ``⌈n/C⌉`` up to the number of pieces;
* target shapes ``ρ_j = min(1, α + (1 − α)·min(j, v − 1 − j)/r)``: flat (``r = 0``), a ramp
  over ``r = p`` micro-batches from ``α = 0.35``, a ramp over ``r = 2p`` from ``α = 0.2``;
  targets ``τ_j = W·ρ_j/Σρ``;
* for each, pieces longest first into the micro-batch furthest below its target that has room
  (``tokens + s ≤ C``), then the micro-batches in "organ" order: sorted by time, the smallest
  last, the next smallest first, and so on inwards (the largest in the middle);
* first-fit decreasing in its own order and in organ order, so balanced packing is never worse
  than fixed-capacity packing.

All candidates of all pipelines are packed together (numpy over candidates) and timed by the
exact 1F1B simulation, many at once (:func:`hydraulis.cost.pipeline_times_1f1b`); each
pipeline keeps its fastest candidate.

Worked example (``p = 2``, φ = 1/3): times ``(10, 10, 10, 10, 10, 10)`` take 70 ms; the same
60 ms of work as ``(2, 5, 8, 10, 10, 10, 8, 5, 2)`` takes 64.7 ms (plus ``3·c`` for the three
extra micro-batches).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hydraulis.dispatch.packing import Packing, PackingStatus, first_fit_decreasing, organ_order
from hydraulis.dispatch.pipelines import PipelineTable, pipeline_makespans

SHAPES = ((0, 1.0), (1, 0.35), (2, 0.2))
"""Target shapes as (ramp length in multiples of ``p``, starting level α); (0, 1) is flat."""
SPREAD = 2
"""Micro-batch counts tried on each side of the estimate's best ``v``."""


def balanced_packings(table: PipelineTable, pieces_of: list[np.ndarray], tokens: np.ndarray,
                      work: np.ndarray, kappa: float) -> list[Packing]:
    """The fastest packing found for every pipeline; ``pieces_of[p]`` lists pipeline ``p``'s
    piece positions, longest first."""
    packings: list[Packing | None] = [None] * table.pipelines
    candidates = _Candidates(table, tokens, work)
    for p, pieces in enumerate(pieces_of):
        g = int(table.group_of[p])
        if pieces.size == 0:
            packings[p] = Packing((), 0.0, PackingStatus.IDLE)
            continue
        capacity, c = int(table.capacity[g]), float(table.c[g])
        bins = first_fit_decreasing(tokens[pieces], capacity)
        if table.pp[g] == 1:
            fewest = -(-int(tokens[pieces].sum()) // capacity)
            status = PackingStatus.OPTIMAL if len(bins) == fewest else PackingStatus.GREEDY
            total = float(work[g, pieces].sum()) + len(bins) * c
            packings[p] = Packing(tuple(pieces[b] for b in bins), total, status)
        else:
            candidates.add_pipeline(p, pieces, bins, kappa)
    for p, packing in candidates.best().items():
        packings[p] = packing
    return packings


@dataclass
class _Row:
    """One candidate packing of pipeline ``p``: micro-batches (piece positions) in order."""

    p: int
    micro_batches: list[np.ndarray]
    times: np.ndarray


class _Candidates:
    """Candidate packings of many-stage pipelines, packed together and timed together."""

    def __init__(self, table: PipelineTable, tokens: np.ndarray, work: np.ndarray) -> None:
        self.table, self.tokens, self.work = table, tokens, work
        self.rows: list[_Row] = []
        self.targets: list[tuple[int, np.ndarray, np.ndarray]] = []

    def add_pipeline(self, p: int, pieces: np.ndarray, ffd_bins: list[list[int]], kappa: float) -> None:
        g = int(self.table.group_of[p])
        pp, c, capacity = int(self.table.pp[g]), float(self.table.c[g]), int(self.table.capacity[g])
        work = self.work[g, pieces]
        ffd = [pieces[b] for b in ffd_bins]
        ffd_times = np.array([c + self.work[g, mb].sum() for mb in ffd])
        self.rows.append(_Row(p, ffd, ffd_times))
        organ = organ_order(ffd_times)
        self.rows.append(_Row(p, [ffd[j] for j in organ], ffd_times[organ]))
        total = float(work.sum())
        fewest = max(1, -(-int(self.tokens[pieces].sum()) // capacity))
        best = math.sqrt(kappa * (pp - 1) * total / c) if c > 0 else float(pieces.size)
        centre = min(max(round(best), fewest), pieces.size)
        counts = sorted({min(max(centre + delta, fewest), pieces.size) for delta in range(-SPREAD, SPREAD + 1)})
        for v in counts:
            for ramp, alpha in SHAPES:
                self.targets.append((p, pieces, total * _shape(v, ramp * pp, alpha)))

    def best(self) -> dict[int, Packing]:
        self._pack_to_targets()
        times = [row.times for row in self.rows]
        stages = [int(self.table.pp[self.table.group_of[row.p]]) for row in self.rows]
        makespan = pipeline_makespans(times, stages, self.table.model)
        chosen: dict[int, int] = {}
        for i, row in enumerate(self.rows):
            if row.p not in chosen or makespan[i] < makespan[chosen[row.p]]:
                chosen[row.p] = i
        return {p: Packing(tuple(self.rows[i].micro_batches), float(makespan[i]), PackingStatus.GREEDY)
                for p, i in chosen.items()}

    def _pack_to_targets(self) -> None:
        """Longest piece first into the micro-batch furthest below its target with room, for
        all target rows at once (rows × micro-batches arrays)."""
        if not self.targets:
            return
        table, rows = self.table, len(self.targets)
        width = max(t.size for _, _, t in self.targets)
        depth = max(pieces.size for _, pieces, _ in self.targets)
        groups = np.array([table.group_of[p] for p, _, _ in self.targets])
        capacity = table.capacity[groups][:, None]
        target = np.full((rows, width), -np.inf)
        position = np.full((rows, depth), -1, dtype=np.int64)
        for r, (_, pieces, t) in enumerate(self.targets):
            target[r, :t.size] = t
            position[r, :pieces.size] = pieces
        present = position >= 0
        size = np.where(present, self.tokens[np.maximum(position, 0)], 0)
        cost = np.where(present, self.work[groups[:, None], np.maximum(position, 0)], 0.0)
        load = np.zeros((rows, width))
        held = np.zeros((rows, width), dtype=np.int64)
        choice = np.zeros((rows, depth), dtype=np.int64)
        failed = np.zeros(rows, dtype=bool)
        every = np.arange(rows)
        open_bin = np.isfinite(target)
        for k in range(depth):
            slack = np.where(open_bin & (held + size[:, k, None] <= capacity), target - load, -np.inf)
            j = slack.argmax(axis=1)
            placed = present[:, k] & np.isfinite(slack[every, j])
            failed |= present[:, k] & ~placed
            load[every[placed], j[placed]] += cost[placed, k]
            held[every[placed], j[placed]] += size[placed, k]
            choice[:, k] = j
        c = table.c[groups][:, None]
        used = held > 0
        for r in np.flatnonzero(~failed):
            p, pieces, _ = self.targets[r]
            bins = np.flatnonzero(used[r])
            times = c[r, 0] + load[r, bins]
            order = bins[organ_order(times)]
            chosen = choice[r, :pieces.size]
            self.rows.append(_Row(p, [pieces[chosen == j] for j in order], c[r, 0] + load[r, order]))


def _shape(v: int, ramp: int, alpha: float) -> np.ndarray:
    """``ρ/Σρ`` for ``v`` micro-batches: a ramp over ``ramp`` micro-batches from ``alpha``."""
    j = np.arange(v)
    edge = np.minimum(j, v - 1 - j)
    rho = np.ones(v) if ramp == 0 else np.minimum(1.0, alpha + (1.0 - alpha) * edge / ramp)
    return rho / rho.sum()

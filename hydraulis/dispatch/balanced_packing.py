"""Stage 2: one pipeline's pieces → micro-batches in an order that minimises its 1F1B time.

**One stage** (``p = 1``): ``T = Σ_j (c + W_j) = W + v·c``, so the fewest micro-batches win;
first-fit decreasing, optimal when it reaches ``v = ⌈n/C⌉``.

The details: :func:`balanced_packings`."""

from __future__ import annotations

from functools import lru_cache

import numba
import numpy as np

from hydraulis.cost import pipeline_times_1f1b
from hydraulis.dispatch.estimate import estimate_ms
from hydraulis.dispatch.packing import Packing, PackingStatus, first_fit_decreasing, organ_order
from hydraulis.dispatch.pipelines import PipelineTable, pipeline_makespans

SHAPES = ((0, 1.0), (1, 0.35), (2, 0.2))
"""Target shapes as (ramp length in multiples of ``p``, starting level α); (0, 1) is flat."""
SPREAD = 2
"""Micro-batch counts tried on each side of the estimate's best ``v``."""
FIRST_ROW = (0, 1)
"""The target row every searched pipeline tries first: the estimate's ``v``, a ramp over ``p``."""
REPRESENTED = 8
"""A class of at least this many identical many-stage pipelines searches its targets on a few."""
REPRESENTATIVES = 2
"""The most loaded pipelines of such a class that try every target row."""


def balanced_packings(table: PipelineTable, pieces_of: list[np.ndarray], tokens: np.ndarray,
                      work: np.ndarray, kappa: float, floor_ms: float = 0.0) -> list[Packing]:
    """The fastest packing found for every pipeline; ``pieces_of[p]`` lists pipeline ``p``'s
    piece positions, longest first; ``floor_ms`` is a time the slowest pipeline takes in any
    plan (e.g. the strategy's bound ``B_k`` less the reduction, :mod:`.bounds`).

    **Several stages.** Under 1F1B with micro-batch times ``t_1 … t_v`` the exact time is about
    ``Σ_j t_j + (p − 1)·(fill and drain)``; the fill/drain shrinks when micro-batches are small at
    both ends and large in the middle (with ``p = 2`` the last stage stalls by about
    ``φ·t_{j+1} + (1 − φ)·t_{j−1} − t_j`` whenever that is positive, so times may rise freely but
    must fall gently), while every extra micro-batch costs ``c``. Candidates:

    * first-fit decreasing in its own order and in organ order, so balanced packing is never worse
      than fixed-capacity packing;
    * ``v`` around the estimate's ``v* = √(κ·(p − 1)·W/c)`` (:mod:`hydraulis.dispatch.estimate`),
      from ``⌈n/C⌉`` up to the number of pieces;
    * target shapes ``ρ_j = min(1, α + (1 − α)·min(j, v − 1 − j)/r)``: flat (``r = 0``), a ramp
      over ``r = p`` micro-batches from ``α = 0.35``, a ramp over ``r = 2p`` from ``α = 0.2``;
      targets ``τ_j = W·ρ_j/Σρ``;
    * for each, pieces longest first into the micro-batch furthest below its target that has room
      (``tokens + s ≤ C``), then the micro-batches in "organ" order: sorted by time, the smallest
      last, the next smallest first, and so on inwards (the largest in the middle).

    **Only pipelines that can set the step's time search targets.** The step takes the slowest
    pipeline's time, and no plan of these pieces is faster than the floor

        F = max(floor_ms, max_p LB_p),   LB_p = max(W_p + v_p·c + (p − 1)·(c + 2d),  p·(c + w_1) + 2·(p − 1)·d)

    (``v_p = ⌈n_p/C⌉``; the first term is the closed form of :mod:`hydraulis.cost.pipeline` with
    every micro-batch at least ``c``, the second the micro-batch holding the longest piece ``w_1``
    crossing every stage forward and back). A pipeline whose first-fit packing already takes at
    most ``F`` keeps it: searching it cannot change the step's time. Worked example: 405B on
    16,384 devices, a 131K piece alone on a ``(16,8,4)`` pipeline gives ``LB = 14,658`` ms, and the
    four ``(16,8,16)`` pipelines, ~1,700 short pieces each, first-fit to ~12,240 ms: they keep it.
    A searched pipeline first tries one row, :data:`FIRST_ROW`, and every row only while it is
    still above ``F``.

    All target rows of all searched pipelines are packed in one compiled pass (:func:`_place`)
    and timed by the exact 1F1B simulation, many at once
    (:func:`hydraulis.cost.pipeline_times_1f1b`); each pipeline keeps its fastest candidate (the
    first on ties).

    Worked example (``p = 2``, φ = 1/3): times ``(10, 10, 10, 10, 10, 10)`` take 70 ms; the same
    60 ms of work as ``(2, 5, 8, 10, 10, 10, 8, 5, 2)`` takes 64.7 ms (plus ``3·c`` for the three
    extra micro-batches).
    """
    packings: list[Packing | None] = [None] * table.pipelines
    staged: list[int] = []
    pp, capacities, c = table.pp.tolist(), table.capacity.tolist(), table.c.tolist()
    for p, (pieces, g) in enumerate(zip(pieces_of, table.group_of.tolist())):
        if pieces.size == 0:
            packings[p] = Packing((), 0.0, PackingStatus.IDLE)
        elif pp[g] == 1:
            sizes = tokens[pieces]
            bins = first_fit_decreasing(sizes, capacities[g])
            fewest = -(-int(sizes.sum()) // capacities[g])
            status = PackingStatus.OPTIMAL if len(bins) == fewest else PackingStatus.GREEDY
            total = float(work[g, pieces].sum()) + len(bins) * c[g]
            packings[p] = Packing(tuple(pieces[b] for b in bins), total, status)
        else:
            staged.append(p)
    if not staged:
        return packings
    for p, packing in zip(staged, _first_fit_packings(table, [pieces_of[p] for p in staged], staged, tokens, work)):
        packings[p] = packing
    floor = max(floor_ms, float(_lower_bounds(table, pieces_of, tokens, work).max()))
    searched = [p for p in staged if packings[p].time_ms > floor]
    if searched:
        first = _Candidates(table, [pieces_of[p] for p in searched], [packings[p] for p in searched], searched,
                            tokens, work, kappa, [(FIRST_ROW,)] * len(searched))
        for p, packing in zip(searched, first.best()):
            if packing is not None:
                packings[p] = packing
        searched = [p for p in searched if packings[p].time_ms > floor]
    if searched:
        for p, packing in zip(searched, _staged_packings(table, pieces_of, packings, searched, tokens, work, kappa)):
            if packing is not None:
                packings[p] = packing
    return packings


def _first_fit_packings(table: PipelineTable, pieces_of: list[np.ndarray], pipelines: list[int],
                        tokens: np.ndarray, work: np.ndarray) -> list[Packing]:
    """First-fit decreasing of every many-stage pipeline, in its own order or in organ order,
    whichever is faster (its own on ties), all timed together."""
    groups = table.group_of[pipelines].tolist()
    bins = [[pieces[b] for b in first_fit_decreasing(tokens[pieces], int(table.capacity[g]))]
            for pieces, g in zip(pieces_of, groups)]
    times = [table.c[g] + np.add.reduceat(work[g, np.concatenate(mbs)], np.cumsum([0] + [mb.size for mb in mbs[:-1]]))
             for mbs, g in zip(bins, groups)]
    organ = [organ_order(t) for t in times]
    stages = table.pp[groups].tolist()
    both = pipeline_makespans(times + [t[o] for t, o in zip(times, organ)], stages * 2, table.model)
    natural_ms, organ_ms = both[:len(times)], both[len(times):]
    return [Packing(tuple(mbs), float(natural), PackingStatus.GREEDY) if natural <= in_organ else
            Packing(tuple(mbs[j] for j in order), float(in_organ), PackingStatus.GREEDY)
            for mbs, order, natural, in_organ in zip(bins, organ, natural_ms.tolist(), organ_ms.tolist())]


def _lower_bounds(table: PipelineTable, pieces_of: list[np.ndarray], tokens: np.ndarray, work: np.ndarray) -> np.ndarray:
    """``LB_p`` of :func:`balanced_packings` for every pipeline holding pieces (at once)."""
    held = [p for p, pieces in enumerate(pieces_of) if pieces.size]
    counts = np.array([pieces_of[p].size for p in held])
    positions = np.concatenate([pieces_of[p] for p in held])
    starts = np.cumsum(counts) - counts
    g = table.group_of[held]
    pp, c, d = table.pp[g], table.c[g], table.model.p2p_ms
    piece_work = work[np.repeat(g, counts), positions]
    fewest = np.maximum(1, -(-np.add.reduceat(tokens[positions], starts) // table.capacity[g]))
    spread = np.add.reduceat(piece_work, starts) + fewest * c + (pp - 1) * (c + 2.0 * d)
    return np.maximum(spread, pp * (c + piece_work[starts]) + 2.0 * (pp - 1) * d)


def _staged_packings(table: PipelineTable, pieces_of: list[np.ndarray], first_fit: list[Packing],
                     staged: list[int], tokens: np.ndarray, work: np.ndarray, kappa: float) -> list[Packing | None]:
    """The best target-row packings of the many-stage pipelines ``staged`` where one beats
    ``first_fit[p]`` (else None): every row for the pipelines of small classes and for the :data:`REPRESENTATIVES` most
    loaded of each class of at least :data:`REPRESENTED`; the class's other pipelines try the
    target row (``v`` offset from their own estimate, shape) that won on its most loaded
    pipeline, or none when first-fit won there."""
    classes: dict[int, list[int]] = {}
    for p in staged:
        classes.setdefault(int(table.group_of[p]), []).append(p)
    searched, leads, rest = [], {}, {}
    for g, members in classes.items():
        if len(members) < REPRESENTED:
            searched += members
            continue
        ranked = sorted(members, key=lambda p: (-float(work[g, pieces_of[p]].sum()), p))
        searched += ranked[:REPRESENTATIVES]
        leads[g], rest[g] = ranked[0], ranked[REPRESENTATIVES:]
    searched.sort()
    first = _Candidates(table, [pieces_of[p] for p in searched], [first_fit[p] for p in searched], searched,
                        tokens, work, kappa)
    found = dict(zip(searched, first.best()))
    if rest:
        allowed = {}
        for g, others in rest.items():
            won = first.won[searched.index(leads[g])]
            allowed.update({p: () if won is None else (won,) for p in others})
        others = sorted(allowed)
        second = _Candidates(table, [pieces_of[p] for p in others], [first_fit[p] for p in others], others,
                             tokens, work, kappa, [allowed[p] for p in others])
        found.update(zip(others, second.best()))
    return [found[p] for p in staged]


class _Candidates:
    """Target-row packings of many-stage pipelines, packed and timed together; only the winners
    built."""

    def __init__(self, table: PipelineTable, pieces_of: list[np.ndarray], first_fit: list[Packing],
                 pipelines: list[int], tokens: np.ndarray, work: np.ndarray, kappa: float,
                 allowed: list[tuple[tuple[int, int], ...]] | None = None) -> None:
        self.table, self.pieces_of, self.tokens, self.work = table, pieces_of, tokens, work
        self.groups = table.group_of[pipelines]
        self.pp = table.pp[self.groups]
        self.c = table.c[self.groups]
        self.capacity = table.capacity[self.groups]
        self.first_fit = first_fit
        self.owner, self.targets, self.keys = self._target_rows(kappa, allowed)
        self.won: list[tuple[int, int] | None] = []

    def best(self) -> list[Packing | None]:
        """Each pipeline's fastest target row when it beats first-fit (else None); ``won``
        records, per pipeline, the key of that row (else None)."""
        choice, order, used, target_ms = self._pack_to_targets()
        packings: list[Packing | None] = []
        first_row = np.searchsorted(self.owner, np.arange(len(self.pieces_of) + 1)).tolist()
        self.won = []
        for i, (pieces, first_fit) in enumerate(zip(self.pieces_of, self.first_fit)):
            mine = target_ms[first_row[i]:first_row[i + 1]]
            best_row = first_row[i] + int(np.argmin(mine)) if mine.size else -1
            if mine.size and target_ms[best_row] < first_fit.time_ms:
                chosen = choice[best_row, :pieces.size]
                micro_batches = tuple(pieces[chosen == j] for j in order[best_row, :used[best_row]])
                packings.append(Packing(micro_batches, float(target_ms[best_row]), PackingStatus.GREEDY))
                self.won.append(self.keys[best_row])
            else:
                packings.append(None)
                self.won.append(None)
        return packings

    def _work_rows(self) -> list[np.ndarray]:
        """Every pipeline's row of ``work`` (views)."""
        return [self.work[g] for g in self.groups.tolist()]

    def _target_rows(self, kappa: float, allowed: list[tuple[tuple[int, int], ...]] | None
                     ) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]:
        """Per target row: its pipeline (index into ``pieces_of``, ascending), targets ``τ_j``
        (−∞ past ``v``) and key (``v`` minus the pipeline's estimate, shape index); only the
        keys ``allowed[i]`` for pipeline ``i`` when given."""
        owner, totals, shapes, keys = [], [], [], []
        for i, (pieces, row, pp, c, capacity) in enumerate(zip(self.pieces_of, self._work_rows(), self.pp.tolist(),
                                                                self.c.tolist(), self.capacity.tolist())):
            total = float(row[pieces].sum())
            held = int(self.tokens[pieces].sum())
            fewest = max(1, -(-held // capacity))
            centre = round(estimate_ms(total, held, 0.0, pieces.size, c, pp, capacity, kappa, 0.0)[1])
            counts = sorted({min(max(centre + d, fewest), pieces.size) for d in range(-SPREAD, SPREAD + 1)})
            rows = ([(v, s) for v in counts for s in range(len(SHAPES))] if allowed is None else
                    [(min(max(centre + d, fewest), pieces.size), s) for d, s in allowed[i]])
            for v, s in rows:
                ramp, alpha = SHAPES[s]
                owner.append(i)
                totals.append(total)
                shapes.append(_shape(v, ramp * pp, alpha))
                keys.append((v - centre, s))
        if not shapes:
            return np.zeros(0, dtype=np.int64), np.zeros((0, 1)), keys
        width = max(t.size for t in shapes)
        rho = np.zeros((len(shapes), width))
        for r, t in enumerate(shapes):
            rho[r, :t.size] = t
        sizes = np.array([t.size for t in shapes])
        targets = np.where(np.arange(width) < sizes[:, None], np.array(totals)[:, None] * rho, -np.inf)
        return np.array(owner, dtype=np.int64), targets, keys

    def _pack_to_targets(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Longest piece first into the micro-batch furthest below its target with room, for all
        target rows at once; per row the piece → micro-batch choice, the execution order of the
        used micro-batches (organ order; the first ``used`` entries of its row), ``used`` and the
        exact 1F1B time (∞ where a piece found no room). Rows are packed in decreasing order of
        their pipeline's pieces, so that at piece ``k`` only the rows still placing pieces (a
        prefix) are touched; a row past its pipeline's last piece would place empty pieces (no
        tokens, no work), which change nothing."""
        rows, width = self.targets.shape
        depth = max(p.size for p in self.pieces_of)
        if rows == 0:
            return (np.zeros((0, depth), dtype=np.int64), np.zeros((0, width), dtype=np.int64),
                    np.zeros(0, dtype=np.int64), np.zeros(0))
        counts = np.array([p.size for p in self.pieces_of])[self.owner]
        by_count = np.argsort(-counts, kind="stable")
        live = np.searchsorted(-counts[by_count], -np.arange(depth), side="left").tolist()
        owner, targets = self.owner[by_count], self.targets[by_count]
        position = np.full((len(self.pieces_of), depth), -1, dtype=np.int64)
        for i, pieces in enumerate(self.pieces_of):
            position[i, :pieces.size] = pieces
        position = position[owner].T
        present = position >= 0
        safe = np.maximum(position, 0)
        size = np.where(present, self.tokens[safe], 0)
        cost = np.where(present, self.work[self.groups[owner][None, :], safe], 0.0)
        open_bin = np.isfinite(targets)
        capacity = self.capacity[owner][:, None]
        room = np.where(open_bin, capacity, -1).astype(np.int64)
        choice, fitted, load = _place(np.ascontiguousarray(targets), room, np.ascontiguousarray(size, dtype=np.int64),
                                      np.ascontiguousarray(cost), np.array(live, dtype=np.int64))
        failed = ~fitted.all(axis=0)
        held = np.where(open_bin, capacity - room, 0)
        times = np.where(held > 0, self.c[owner][:, None] + load, np.inf)
        used = (held > 0).sum(axis=1)
        ranked = np.argsort(times, axis=1, kind="stable")
        order = np.full((rows, width), -1, dtype=np.int64)
        makespan = np.full(rows, np.inf)
        pp = self.pp[owner]
        ok = np.flatnonzero(~failed)
        for stages, v in set(zip(pp[ok].tolist(), used[ok].tolist())):
            members = ok[(pp[ok] == stages) & (used[ok] == v)]
            order[members, :v] = ranked[members, :v][:, _organ_slots(v)]
            makespan[members] = pipeline_times_1f1b(np.take_along_axis(times[members], order[members, :v], axis=1),
                                                    stages, self.table.model)
        back = np.argsort(by_count)
        return choice.T[back], order[back], used[back], makespan[back]


@numba.njit(cache=True)
def _place(targets, room, size, cost, live):
    """The target rule, compiled: piece ``k`` of row ``r < live[k]`` (sizes ``size[k, r]``, work
    ``cost[k, r]``) goes to the micro-batch ``j`` with the largest ``targets[r, j] − load[r, j]``
    among those with ``room[r, j] ≥ size`` (the first on ties); ``fitted`` is False where none
    has room. ``room`` is updated in place; returns the choices, ``fitted`` and the loads."""
    depth, rows = size.shape
    width = targets.shape[1]
    load = np.zeros((rows, width))
    choice = np.zeros((depth, rows), dtype=np.int64)
    fitted = np.ones((depth, rows), dtype=np.bool_)
    for k in range(depth):
        for r in range(live[k]):
            s, best, at = size[k, r], -np.inf, -1
            for j in range(width):
                if room[r, j] >= s:
                    gap = targets[r, j] - load[r, j]
                    if gap > best:
                        best, at = gap, j
            if at < 0:
                fitted[k, r] = False
            else:
                choice[k, r] = at
                load[r, at] += cost[k, r]
                room[r, at] -= s
    return choice, fitted, load


@lru_cache(maxsize=1024)
def _shape(v: int, ramp: int, alpha: float) -> np.ndarray:
    """``ρ/Σρ`` for ``v`` micro-batches: a ramp over ``ramp`` micro-batches from ``alpha``."""
    j = np.arange(v)
    edge = np.minimum(j, v - 1 - j)
    rho = np.ones(v) if ramp == 0 else np.minimum(1.0, alpha + (1.0 - alpha) * edge / ramp)
    return rho / rho.sum()


@lru_cache(maxsize=1024)
def _organ_slots(v: int) -> np.ndarray:
    """Ranks (ascending) in organ order: position ``i`` runs the micro-batch of rank ``[i]``."""
    return organ_order(np.arange(v, dtype=np.float64))

"""Stage 1: pieces → pipelines, minimising the slowest pipeline's estimated time.

Pieces are taken longest first (the batch is sorted so). Each goes to the pipeline whose
estimated time ``T_p`` (:mod:`hydraulis.dispatch.estimate`) would be smallest after taking it,
among the pipelines that can hold it (``s ≤ C_p``) — the longest-processing-time rule for
machines of different speeds, with capacity classes: a long piece that only some pipelines can
hold comes first and goes to one of them, before shorter pieces fill those pipelines. Identical
pipelines form a group; within a group only the pipeline with the smallest ``T_p`` is a
candidate (a heap per group), so a piece costs ``O(G·log P)``.

Local moves then take the slowest pipeline ``p*`` and move the one piece ``i`` to the pipeline
``q`` (the least loaded of each group that can hold ``i``) minimising ``max(T_p*∖i, T_q∪i)``,
while that is below ``T_p*`` (at most ``local_moves`` times); a move weighs all of ``p*``'s
pieces against every group at once (numpy) and takes them in the order of that scan.

Worked example: pipelines A (C = 8K, fast) and B (C = 32K, twice as slow), pieces 20K, 6K,
6K, 6K: the 20K piece can only go to B; the 6K pieces go to A while ``T_A + w_A(6K)`` stays
below ``T_B + w_B(6K)``.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from hydraulis.base.errors import require
from hydraulis.dispatch.estimate import estimate_many, estimate_ms
from hydraulis.dispatch.pipelines import PipelineTable


def assign_pieces(table: PipelineTable, tokens: np.ndarray, work: np.ndarray,
                  kappa: float, local_moves: int) -> np.ndarray:
    """Pipeline index of every piece (``tokens`` sorted descending, ``work`` from
    :meth:`PipelineTable.work`); every piece must fit some pipeline."""
    state = _Loads(table, tokens, work, kappa)
    state.longest_first()
    for _ in range(local_moves):
        if not state.move_one_off_slowest():
            break
    return state.owner


class _Loads:
    """Per-pipeline work, tokens, pieces and estimate, as Python lists (the
    loops below touch single entries, where lists are faster than numpy)."""

    def __init__(self, table: PipelineTable, tokens: np.ndarray, work: np.ndarray, kappa: float) -> None:
        self.table = table
        self.tokens = tokens.tolist()
        self.work = work.tolist()
        self.kappa = kappa
        self.d = table.model.p2p_ms
        self.constants = [(float(table.c[g]), int(table.pp[g]), int(table.capacity[g])) for g in range(table.groups)]
        self.member_arrays = [np.flatnonzero(table.group_of == g) for g in range(table.groups)]
        self.members = [m.tolist() for m in self.member_arrays]
        self.work_array, self.token_array = work, tokens
        # pieces k >= first[g] fit group g (tokens are sorted descending)
        self.first = [int(np.searchsorted(-tokens, -table.capacity[g], side="left")) for g in range(table.groups)]
        pipelines = table.pipelines
        self.group_of = table.group_of.tolist()
        self.load = [0.0] * pipelines
        self.held = [0] * pipelines
        self.pieces: list[list[int]] = [[] for _ in range(pipelines)]
        self.estimate = [0.0] * pipelines
        self.owner = np.full(len(self.tokens), -1, dtype=np.int64)

    def longest_first(self) -> None:
        """Every piece, longest first, to the pipeline whose estimate would be smallest after
        taking it (the top of each group's heap that can hold it), in compiled code
        (:func:`_longest_first`); then the per-pipeline lists the local moves use."""
        table = self.table
        order = np.array(sorted(range(table.groups), key=lambda g: self.first[g]), dtype=np.int64)
        starts = np.array([self.first[g] for g in order.tolist()] + [len(self.tokens)], dtype=np.int64)
        require(starts[0] == 0, "pieces", self.tokens[0] if self.tokens else 0, "must fit some pipeline")
        members = np.concatenate(self.member_arrays).astype(np.int64)
        member_start = np.cumsum([0] + [m.size for m in self.member_arrays]).astype(np.int64)
        owner, load, held, estimate = _longest_first(
            self.token_array.astype(np.int64), np.ascontiguousarray(self.work_array, dtype=np.float64), order, starts,
            members, member_start, table.c.astype(np.float64), table.pp.astype(np.int64),
            table.capacity.astype(np.int64), float(self.kappa), float(self.d))
        self.owner[:] = owner
        self.load, self.held, self.estimate = load.tolist(), held.tolist(), estimate.tolist()
        by_owner = np.argsort(owner, kind="stable")
        bounds = np.searchsorted(owner[by_owner], np.arange(table.pipelines + 1)).tolist()
        self.pieces = [by_owner[a:b].tolist() for a, b in zip(bounds, bounds[1:])]

    def move_one_off_slowest(self) -> bool:
        """One local move of the module docstring; the candidates' estimates are computed at once
        (numpy), then taken in the order of the scan piece by piece, group by group, each only
        when it beats the best so far by more than ``1e-9·T_p*``."""
        estimate = np.asarray(self.estimate)
        slowest = int(np.argmax(estimate))
        current = self.estimate[slowest]
        held = np.asarray(self.pieces[slowest], dtype=np.int64)
        if held.size == 0:
            return False
        without = self._estimates_without(slowest, held)
        new = np.full((held.size, self.table.groups), np.inf)
        for g in range(self.table.groups):
            q = self._least_loaded(g, slowest, estimate)
            fits = held >= self.first[g]
            if q >= 0 and fits.any():
                new[fits, g] = np.maximum(without[fits], self._estimates_with(q, g, held[fits]))
        best, chosen = current, None
        rows, groups = np.nonzero(new < current - 1e-9 * current)
        for i, value in enumerate(new[rows, groups].tolist()):
            if value < best - 1e-9 * current:
                best, chosen = value, i
        if chosen is None:
            return False
        row, g = int(rows[chosen]), int(groups[chosen])
        k, q, without_k = int(held[row]), self._least_loaded(g, slowest, estimate), float(without[row])
        self._drop(slowest, k, without_k)
        self._take(q, k, self.tokens[k], self._estimate_with(q, self.group_of[q], k))
        return True

    def _least_loaded(self, g: int, excluded: int, estimate: np.ndarray) -> int:
        """The pipeline of group ``g`` with the smallest estimate (the first on ties) other than
        ``excluded``; −1 when there is none."""
        members = self.member_arrays[g]
        candidates = members[members != excluded]
        return int(candidates[np.argmin(estimate[candidates])]) if candidates.size else -1

    def _estimates_with(self, p: int, g: int, ks: np.ndarray) -> np.ndarray:
        """:meth:`_estimate_with` for pieces ``ks`` at once."""
        c, pp, capacity = self.constants[g]
        w = self.work_array[g, ks]
        mine = self.pieces[p]
        longest = np.where(ks > mine[0], self.work_array[g, mine[0]], w) if mine else w
        return estimate_many(self.load[p] + w, self.held[p] + self.token_array[ks], longest,
                             np.full(ks.size, len(mine) + 1), c, pp, capacity, self.kappa, self.d)

    def _estimates_without(self, p: int, ks: np.ndarray) -> np.ndarray:
        """The estimates of pipeline ``p`` without each of its own pieces ``ks`` (ascending)."""
        g = self.group_of[p]
        c, pp, capacity = self.constants[g]
        first = np.where(ks == ks[0], ks[1] if ks.size > 1 else -1, ks[0])
        longest = np.where(first >= 0, self.work_array[g, np.maximum(first, 0)], 0.0)
        return estimate_many(self.load[p] - self.work_array[g, ks], self.held[p] - self.token_array[ks], longest,
                             np.full(ks.size, ks.size - 1), c, pp, capacity, self.kappa, self.d)

    def _estimate_with(self, p: int, g: int, k: int) -> float:
        c, pp, capacity = self.constants[g]
        w = self.work[g][k]
        longest = self.work[g][self.pieces[p][0]] if self.pieces[p] and self.pieces[p][0] < k else w
        return estimate_ms(self.load[p] + w, self.held[p] + self.tokens[k], longest, len(self.pieces[p]) + 1,
                           c, pp, capacity, self.kappa, self.d)[0]

    def _take(self, p: int, k: int, s: int, estimate: float) -> None:
        g = self.group_of[p]
        self.load[p] += self.work[g][k]
        self.held[p] += s
        pieces = self.pieces[p]
        if pieces and pieces[-1] > k:
            pieces.append(k)
            pieces.sort()
        else:
            pieces.append(k)
        self.estimate[p] = estimate
        self.owner[k] = p

    def _drop(self, p: int, k: int, estimate: float) -> None:
        g = self.group_of[p]
        self.load[p] -= self.work[g][k]
        self.held[p] -= self.tokens[k]
        self.pieces[p].remove(k)
        self.estimate[p] = estimate


@numba.njit(cache=True)
def _longest_first(tokens, work, order, starts, members, member_start, c, pp, capacity, kappa, p2p_ms):
    """:meth:`_Loads.longest_first`'s loop: pieces ``starts[e−1] … starts[e]−1`` may go to the
    first ``e`` groups of ``order``; group ``g``'s pipelines are ``members[member_start[g]:
    member_start[g+1]]``, kept as a binary heap on ``(estimate, pipeline)`` — the least
    estimate, the lowest pipeline on ties, as Python's ``heapq`` on tuples. Returns every
    piece's pipeline and every pipeline's work, tokens and estimate."""
    pipelines = members.size
    owner = np.full(tokens.size, -1, dtype=np.int64)
    load = np.zeros(pipelines)
    held = np.zeros(pipelines, dtype=np.int64)
    count = np.zeros(pipelines, dtype=np.int64)
    longest = np.zeros(pipelines)
    key = np.zeros(pipelines)
    ident = members.copy()
    for eligible in range(1, order.size + 1):
        for k in range(starts[eligible - 1], starts[eligible]):
            s = tokens[k]
            best, chosen, chosen_group, chosen_work = math.inf, -1, -1, 0.0
            for i in range(eligible):
                g = order[i]
                p = ident[member_start[g]]
                w = work[g, k]
                first = longest[p] if count[p] > 0 else w
                new = estimate_ms(load[p] + w, held[p] + s, first, count[p] + 1, c[g], pp[g], capacity[g], kappa,
                                  p2p_ms)[0]
                if new < best:
                    best, chosen, chosen_group, chosen_work = new, p, g, w
            _replace_top(key, ident, member_start[chosen_group], member_start[chosen_group + 1], best, chosen)
            if count[chosen] == 0:
                longest[chosen] = chosen_work
            count[chosen] += 1
            load[chosen] += chosen_work
            held[chosen] += s
            owner[k] = chosen
    estimate = np.zeros(pipelines)
    for j in range(pipelines):
        estimate[ident[j]] = key[j]
    return owner, load, held, estimate


@numba.njit(cache=True)
def _replace_top(key, ident, lo, hi, new_key, new_ident):
    """Replace the top of the heap ``key[lo:hi]`` (ties by ``ident``) and sift it down."""
    n, i = hi - lo, 0
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        right = child + 1
        if right < n and (key[lo + right] < key[lo + child]
                          or (key[lo + right] == key[lo + child] and ident[lo + right] < ident[lo + child])):
            child = right
        if key[lo + child] < new_key or (key[lo + child] == new_key and ident[lo + child] < new_ident):
            key[lo + i], ident[lo + i] = key[lo + child], ident[lo + child]
            i = child
        else:
            break
    key[lo + i], ident[lo + i] = new_key, new_ident

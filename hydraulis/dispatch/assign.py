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
while that is below ``T_p*`` (at most ``local_moves`` times).

Worked example: pipelines A (C = 8K, fast) and B (C = 32K, twice as slow), pieces 20K, 6K,
6K, 6K: the 20K piece can only go to B; the 6K pieces go to A while ``T_A + w_A(6K)`` stays
below ``T_B + w_B(6K)``.
"""

from __future__ import annotations

import heapq

import numpy as np

from hydraulis.dispatch.estimate import estimate_ms
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
        self.members = [np.flatnonzero(table.group_of == g).tolist() for g in range(table.groups)]
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
        taking it (the top of each group's heap that can hold it). Pieces arrive in increasing
        position, so a pipeline's longest piece is its first and a new piece goes last."""
        heaps = [[(0.0, p) for p in self.members[g]] for g in range(self.table.groups)]
        groups = [(self.first[g], heaps[g], self.work[g], *self.constants[g])
                  for g in sorted(range(self.table.groups), key=lambda g: self.first[g])]
        load, held, pieces, estimate, kappa, d = self.load, self.held, self.pieces, self.estimate, self.kappa, self.d
        owner = [-1] * len(self.tokens)
        for k, s in enumerate(self.tokens):
            best, chosen = None, None
            for first, heap, work, c, pp, capacity in groups:
                if first > k:
                    break
                p = heap[0][1]
                held_by_p, w = pieces[p], work[k]
                new = estimate_ms(load[p] + w, held[p] + s, work[held_by_p[0]] if held_by_p else w, len(held_by_p) + 1,
                                  c, pp, capacity, kappa, d)[0]
                if best is None or new < best:
                    best, chosen = new, (heap, p, w)
            heap, p, w = chosen
            heapq.heapreplace(heap, (best, p))
            load[p] += w
            held[p] += s
            pieces[p].append(k)
            estimate[p] = best
            owner[k] = p
        self.owner[:] = owner

    def move_one_off_slowest(self) -> bool:
        slowest = max(range(len(self.estimate)), key=self.estimate.__getitem__)
        current = self.estimate[slowest]
        targets = [self._least_loaded(g, slowest) for g in range(self.table.groups)]
        best, best_move = current, None
        for k in self.pieces[slowest]:
            without = self._estimate_without(slowest, k)
            if without >= best:
                continue
            for g, q in enumerate(targets):
                if q < 0 or self.first[g] > k:
                    continue
                new = max(without, self._estimate_with(q, g, k))
                if new < best - 1e-9 * current:
                    best, best_move = new, (k, q, without)
        if best_move is None:
            return False
        k, q, without = best_move
        self._drop(slowest, k, without)
        self._take(q, k, self.tokens[k], self._estimate_with(q, self.group_of[q], k))
        return True

    def _least_loaded(self, g: int, excluded: int) -> int:
        candidates = [p for p in self.members[g] if p != excluded]
        return min(candidates, key=self.estimate.__getitem__) if candidates else -1

    def _estimate_with(self, p: int, g: int, k: int) -> float:
        c, pp, capacity = self.constants[g]
        w = self.work[g][k]
        longest = self.work[g][self.pieces[p][0]] if self.pieces[p] and self.pieces[p][0] < k else w
        return estimate_ms(self.load[p] + w, self.held[p] + self.tokens[k], longest, len(self.pieces[p]) + 1,
                           c, pp, capacity, self.kappa, self.d)[0]

    def _estimate_without(self, p: int, k: int) -> float:
        g = self.group_of[p]
        c, pp, capacity = self.constants[g]
        rest = [i for i in self.pieces[p] if i != k]
        longest = self.work[g][rest[0]] if rest else 0.0
        return estimate_ms(self.load[p] - self.work[g][k], self.held[p] - self.tokens[k], longest, len(rest),
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

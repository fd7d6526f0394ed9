"""Local search over pipeline counts, judged on sampled steps.

**What is optimised.** A strategy for the range ``(lo, hi]`` is a count vector ``n`` (pipelines
per scheme option ``k``, ``D_k`` devices each) in

    F = {n ∈ ℤ^K, n ≥ 0 : Σ_k n_k·D_k ≤ N, Σ_{k: S_k ≥ u} n_k ≥ 1, n can be placed on the nodes}

and what the proposal is judged by is the judge's mean step time over the range's sampled
steps ``I`` (planner/evaluate.py, two-stage dispatch and exact 1F1B):

    J(n) = (1/|I|)·Σ_{i∈I} E(n, i)

The details: :class:`CountsSearch`."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

IMPROVEMENT = 1e-3
"""``ε``: a move is taken only when it lowers ``J`` by more than this fraction."""


@dataclass(frozen=True)
class Descent:
    """Where a descent started and ended (count vectors and their ``J``), how many counts it
    judged that no earlier descent had, how many moves it took, and whether the safety stop
    cut it short."""

    start: tuple[int, ...]
    start_ms: float
    counts: tuple[int, ...]
    mean_ms: float
    evaluations: int
    moves: int
    stopped: bool


class CountsSearch:
    """The moves and descent of :class:`CountsSearch` over options of ``sizes`` devices on
    ``devices`` devices; ``score`` is ``J`` (∞ outside ``F``), memoised here.

    The integer programs (planner/program.py) minimise the fluid makespan ``M(n)`` over ``F`` —
    provably, within the bisection's tolerance — but ``M`` is a model of ``J``: it sees the
    *expected* step (how many long sequences a step holds on average, not how that count varies),
    and it spreads work fractionally, so ``argmin M`` can lose to simple strategies under ``J``
    (LLaMA-32B, 1024 devices: ``M``'s answer 50×(1,8,1) + 9×(2,8,1) + 1×(4,8,1) + 7×(8,8,1) has
    ``J`` = 1829 ms, while 40×(1,8,1) + 8×(2,8,1) + 9×(8,8,1) has ``J`` = 1752 ms: the steps that
    hold more 32K sequences than the seven (8,8,1) pipelines run in time decide the mean). ``J`` has no
    closed form but costs milliseconds per step, so the planner searches ``F`` under ``J`` itself,
    from good starts (planner/propose.py: the integer programs' answers, the screened homogeneous
    strategies).

    **Moves.** Shift devices from option ``A`` to option ``B``: with ``f = N − Σ_k n_k·D_k`` idle
    devices,

        n' = n − i·e_A + j·e_B,   i = min(n_A, max(⌈Δ/D_A⌉, ⌈(D_B − f)/D_A⌉)),   j = ⌊(f + i·D_A)/D_B⌋ ≥ 1

    — at least ``Δ`` devices, and enough for one pipeline of ``B``, leave ``A``; the freed and the
    idle devices go to ``B`` (``i = 0``: the idle devices alone, when they make a pipeline of
    ``B``). ``A`` is an option ``n`` uses, ``B`` an *active* option (those of the starts and a few
    of the highest throughput). Every ``n'`` fits the devices; one outside ``F`` has ``J = ∞`` and
    is never taken.

    **Descent** (a pattern search). With ``Δ`` running over ``N/2, N/4, …`` down to the smallest
    pipeline's devices: while some move of size ``Δ`` lowers ``J`` by more than a relative ``ε``,
    take the best one; then halve ``Δ``. The first sizes jump between homogeneous and two-group
    strategies (half the devices to a cheaper scheme), the last ones tune the counts by a
    pipeline. ``J`` falls at every accepted move and ``F`` is finite, so the descent ends, and its
    answer is never worse than its start: ``J(n_end) ≤ J(n_start)``. A search judges at most
    ``max_evaluations`` new neighbours over all its descents (each costs ``|I|`` judged steps; ``J``
    is memoised per count vector) and none anew past its deadline (the planner's safety stop,
    which normally never fires: the evaluation budget, not the clock, bounds the search); past
    either, a descent only moves to counts already judged.

    Worked example (LLaMA-32B analytic on H100s, 1024 devices, 1.6M tokens, 32K maximum, ``J``
    over the sampled steps; active options (1,8,1), (2,8,1), (4,8,1), (8,8,1) — only (8,8,1) holds
    32K under the runtime's memory accounting, (4,8,1) holds 22,370 tokens — and the recomputing
    (1,4,4), (1,4,8), (1,8,4)): from the programs' 50×(1,8,1) + 9×(2,8,1) + 1×(4,8,1) + 7×(8,8,1),
    ``J`` = 1828.9 ms, five moves end at 40×(1,8,1) + 8×(2,8,1) + 9×(8,8,1), 1751.5 ms, having
    judged the whole budget of 120 neighbours; the descent from the homogeneous 16×(8,8,1), 2428.5 ms,
    finds no move within the spent budget (``benchmarks/proposal_time.py`` prints the proposal).
    """

    def __init__(self, sizes: Sequence[int], devices: int, active: Sequence[int],
                 score: Callable[[tuple[int, ...]], float], max_evaluations: int, deadline: float = math.inf) -> None:
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.devices = devices
        self.active = tuple(sorted(set(active)))
        self.score = score
        self.left = max_evaluations
        self.deadline = deadline
        self.memo: dict[tuple[int, ...], float] = {}

    def judge(self, counts: tuple[int, ...]) -> float:
        """``J(counts)``, memoised."""
        if counts not in self.memo:
            self.memo[counts] = float(self.score(counts))
        return self.memo[counts]

    def descend(self, start: Sequence[int]) -> Descent:
        """The descent of :class:`CountsSearch` from ``start``; the neighbours it judges count
        against the search's ``max_evaluations`` (shared by all descents), and none is judged
        anew past ``deadline`` (``time.monotonic``)."""
        start = tuple(int(n) for n in start)
        current, current_ms = start, self.judge(start)
        judged, moves, stopped = len(self.memo), 0, False
        for delta in self.step_sizes():
            while True:
                neighbours = self.neighbours(current, delta)
                fresh = [n for n in neighbours if n not in self.memo][:self.left]
                if fresh and time.monotonic() > self.deadline:
                    fresh, stopped = [], True
                self.left -= len(fresh)
                scored = [(self.judge(n), n) for n in neighbours if n in self.memo or n in fresh]
                if not scored or min(scored)[0] >= current_ms * (1.0 - IMPROVEMENT):
                    break
                current_ms, current = min(scored)
                moves += 1
        return Descent(start, self.memo[start], current, current_ms, len(self.memo) - judged, moves, stopped)

    def step_sizes(self) -> list[int]:
        """``N/2, N/4, …`` down to the smallest pipeline's devices."""
        smallest = int(self.sizes[list(self.active)].min()) if self.active else int(self.sizes.min())
        sizes, delta = [], self.devices // 2
        while delta >= smallest:
            sizes.append(delta)
            delta //= 2
        return sizes or [smallest]

    def neighbours(self, counts: tuple[int, ...], delta: int) -> list[tuple[int, ...]]:
        """Every move of size ``delta`` from ``counts`` (:class:`CountsSearch`), in a fixed order."""
        n = np.asarray(counts, dtype=np.int64)
        idle = self.devices - int(n @ self.sizes)
        found: list[tuple[int, ...]] = []
        for a in [-1, *np.flatnonzero(n > 0)]:
            freed = 0 if a < 0 else int(self.sizes[a])
            for b in self.active:
                if b == a:
                    continue
                size = int(self.sizes[b])
                removed = 0 if a < 0 else min(int(n[a]), max(-(-delta // freed), -(-(size - idle) // freed)))
                added = (idle + removed * freed) // size
                if added == 0:
                    continue
                moved = n.copy()
                moved[b] += added
                if a >= 0:
                    moved[a] -= removed
                candidate = tuple(int(x) for x in moved)
                if candidate not in found:
                    found.append(candidate)
        return found

"""Strategies for steps that differ: complete the proposal where some steps run much faster on
a strategy that the mean of their range does not want.

The serving ranges (planner/specialise.py) split the steps by their longest sequence, and each
range gets the strategy best on *average* over its steps. Steps of one range still differ: in
how many long sequences they hold, and in which scheme finishes their longest sequence fastest
(LLaMA-7B, 32 devices: a 32K sequence takes 1,347 ms on (1,16,1), 1,788 ms on (1,8,1)). Dispatch (and per-step synthesis, which
mixes the proposal's schemes) picks per step, so the proposal is worth

    V(P) = (1/|I|)·Σ_{i∈I} min_{s∈P} J(s, i)

over the sampled steps ``I`` (``J``: the judge's step time, planner/evaluate.py) — a strategy
best on a few steps earns its place even when the range's mean would not choose it.

The details: :func:`complete_proposal`."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from hydraulis.base.types import Strategy
from hydraulis.planner.distribution import StepStatistics
from hydraulis.planner.options import SchemeOption
from hydraulis.planner.search import CountsSearch
from hydraulis.planner.validate import node_placement

Judged = Callable[[Strategy, Sequence[int]], list[float]]
"""Step times of a strategy on sampled steps (∞ where it cannot hold a step)."""


def complete_proposal(kept: list[Strategy], stats: StepStatistics, options: Sequence[SchemeOption], judged: Judged,
                      devices: int, devices_per_node: int, most: int, min_gain: float, search_steps: int,
                      evaluations: int, strategy_of: Callable[[Sequence[int]], Strategy],
                      counts_of: Callable[[Strategy], tuple[int, ...]],
                      deadline: float = math.inf) -> list[tuple[Strategy, np.ndarray, float]]:
    """The strategies the recipe adds to ``kept``, each with the steps it is best on and its
    relative gain ``1 − V(P ∪ {e})/V(P)``.

    Recipe of :func:`complete_proposal` (while fewer than ``K`` strategies):

    1. ``best_i = min_{s∈P} J(s, i)``; the *complement* score of a strategy ``e`` is
       ``Σ_{i∈I'} min(J(e, i), best_i)`` on a spread subset ``I'`` of ``search_steps`` steps;
    2. starts: every kept strategy with one pipeline of a *holder* swapped in — a scheme that
       finishes some step's longest sequence fastest among those that hold it — and the kept
       strategies themselves; a local search (planner/search.py) descends on the complement score,
       its active options those of the starts and the holders;
    3. the best end ``e`` joins ``P`` if ``V(P ∪ {e}) < (1 − min_gain)·V(P)`` on all of ``I``, and
       serves the steps it is best on; else stop.

    ``V`` falls at every added strategy and the proposal's strategies are kept: the proposal is
    never worse than before. :func:`gains` says, per strategy, what it saves on the steps it is
    best on over the next best strategy — what ``propose --explain`` prints.
    """
    everything = np.arange(len(stats.maxima))
    probe = everything[::max(1, len(everything) // search_steps)]
    holders = _holders(stats, options)
    strategies, added = list(kept), []
    while len(strategies) < most:
        best = np.min([judged(s, everything) for s in strategies], axis=0)

        def score(counts: tuple[int, ...]) -> float:
            strategy = strategy_of(counts)
            if not any(counts) or node_placement(strategy, devices, devices_per_node):
                return math.inf
            return float(np.minimum(judged(strategy, probe), best[probe]).sum())

        starts = [counts_of(s) for s in strategies] + [swapped for s in strategies
                                                       for swapped in _with_holders(counts_of(s), holders, options,
                                                                                    devices)]
        active = sorted({k for counts in starts for k in np.flatnonzero(counts)} | set(holders))
        search = CountsSearch([o.devices for o in options], devices, active, score, evaluations, deadline)
        ends = [search.descend(counts) for counts in dict.fromkeys(starts) if np.isfinite(search.judge(counts))]
        if not ends:
            break
        end = strategy_of(min(ends, key=lambda d: (d.mean_ms, d.counts)).counts)
        times = np.asarray(judged(end, everything))
        gain = 1.0 - np.minimum(times, best).mean() / best.mean()
        if end in strategies or gain <= min_gain:
            break
        strategies.append(end)
        added.append((end, everything[times < best], gain))
    return added


def gains(strategies: Sequence[Strategy], judged: Judged, steps: int) -> list[tuple[np.ndarray, float, int]]:
    """Per strategy: the steps it is best on, the mean relative time the next best strategy
    would add on them (0 when none is best), and that next best strategy's index (−1: none)."""
    everything = np.arange(steps)
    times = np.array([judged(s, everything) for s in strategies])
    best = np.argmin(times, axis=0)
    found = []
    for j in range(len(strategies)):
        mine = everything[best == j]
        others = np.delete(times, j, axis=0)
        if not mine.size or not others.size:
            found.append((mine, 0.0, -1))
            continue
        runner_up = np.argmin(others[:, mine], axis=0)
        extra = others[runner_up, mine] / times[j, mine] - 1.0
        index = int(np.bincount(runner_up).argmax())
        found.append((mine, float(np.mean(extra)), index + (index >= j)))
    return found


def _holders(stats: StepStatistics, options: Sequence[SchemeOption]) -> list[int]:
    """Options that finish some step's longest sequence fastest among those that hold it."""
    found = set()
    for m in np.unique(stats.maxima):
        crossing = [o.scheme.pp * o.time.sequence_ms(float(m)) if o.capacity >= m else math.inf
                    for o in options]
        if np.isfinite(min(crossing)):
            found.add(int(np.argmin(crossing)))
    return sorted(found)


def _with_holders(counts: tuple[int, ...], holders: Sequence[int], options: Sequence[SchemeOption],
                  devices: int) -> list[tuple[int, ...]]:
    """``counts`` with one pipeline of each holder it lacks, its devices taken from the
    option with the most devices in use (one pipeline at a time)."""
    sizes = np.array([o.devices for o in options])
    swapped = []
    for k in holders:
        if counts[k]:
            continue
        n = np.array(counts)
        n[k] += 1
        while int(n @ sizes) > devices:
            used = np.flatnonzero((n > 0) & (np.arange(n.size) != k))
            if not used.size:
                break
            n[used[np.argmax(n[used] * sizes[used])]] -= 1
        if int(n @ sizes) <= devices:
            swapped.append(tuple(int(x) for x in n))
    return swapped

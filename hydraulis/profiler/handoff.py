"""The pipeline hand-off ``d``, measured: what a pipeline's makespan holds beyond its own
operations (design §5).

The 1F1B recurrences (:mod:`hydraulis.cost.pipeline`) charge ``d`` ms each time a micro-batch's
activation or gradient passes to the neighbouring stage. On a GPU that is the point-to-point
latency, microseconds. On a CPU whose cores every rank keeps busy it is longer: a stage whose
input has arrived waits for a core before it runs.

The profiler's pipeline points (``pp > 1``, measured on the wall clock) time each run's makespan
``M`` (all ranks start together) and each stage's forward ``f_{σ,j}`` and backward ``b_{σ,j}`` of
every micro-batch (the slowest replica's); ``d`` is the hand-off that makes the replay end at
``M``::

    d = min { d ≥ 0 : T(f, b, d) ≥ M }          (0 when T(f, b, 0) ≥ M already)

``T`` is continuous and nondecreasing in ``d``, so bisection finds it; a point's ``d`` is the
median over its timed runs, the space's ``p2p_ms`` the median over its pipeline points.

Worked example: ``p = 2``, one micro-batch, ``f = (1, 1)``, ``b = (2, 2)`` ms: the schedule is
``f_0, d, f_1, b_1, d, b_0``, ``T = 6 + 2d``; a measured ``M = 8`` ms gives ``d = 1`` ms.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hydraulis.base.bisection import threshold_bracket
from hydraulis.base.errors import require
from hydraulis.cost.pipeline import simulate_1f1b_phases

BISECTIONS = 40
"""Halvings of the bracket ``[0, M]``: ``M·2⁻⁴⁰``, far below a timer's resolution."""


def handoff_ms(forward: Sequence[Sequence[float]], backward: Sequence[Sequence[float]], makespan_ms: float) -> float:
    """``d`` of the module docstring for one run: ``forward[σ][j]``, ``backward[σ][j]`` the
    measured operations, ``makespan_ms`` the measured ``M``."""
    require(len(forward) >= 2, "stages", len(forward), "must be >= 2 (a hand-off needs two stages)")
    require(makespan_ms >= 0, "makespan_ms", makespan_ms, "must be >= 0")

    def replay(d: float) -> float:
        return simulate_1f1b_phases(forward, backward, d).makespan_ms

    if replay(0.0) >= makespan_ms:
        return 0.0
    return threshold_bracket(lambda d: replay(d) >= makespan_ms, 0.0, makespan_ms, BISECTIONS)[1]


def point_handoff(samples: np.ndarray, makespans: np.ndarray, stage_of: np.ndarray, pp: int) -> float:
    """A profile point's hand-off ``d`` (module docstring): per timed run, each
    stage's operations (the slowest of its ranks, micro-batch by micro-batch) replayed against the
    run's makespan (its slowest rank's); the median over the runs. ``samples[rank, k] = (forward,
    backward)`` of the runs' micro-batches in order, ``makespans[rank, run]``, ``stage_of[rank]``
    (−1: outside the pipelines)."""
    runs = makespans.shape[1]
    per_run = samples.reshape(samples.shape[0], runs, -1, 2)
    inside = stage_of >= 0
    fits = []
    for run in range(runs):
        stage_ops = [per_run[stage_of == s, run].max(axis=0) for s in range(pp)]
        fits.append(handoff_ms([ops[:, 0] for ops in stage_ops], [ops[:, 1] for ops in stage_ops],
                               float(makespans[inside, run].max())))
    return float(np.median(fits))

"""A simulation in a few numbers per contender, and Hydraulis' speed-up over each.

Per contender over the ``n`` simulated steps (:func:`hydraulis.dispatch.summarise_plans`): mean
and median predicted step time ``T``; the ratio ``T/LB`` to the plan's own lower bound (how
close dispatch came to what its strategies allow, :mod:`hydraulis.dispatch.dispatcher`) —
median and 90th percentile; the ratio ``T/LB_work`` to design §4's work bound over every usable
scheme (one yardstick for all contenders) — median; the planning wall time per step — median
and 90th percentile; how often each strategy of its proposal ran.

**Speed-up** of Hydraulis over a contender ``c`` is the ratio of the time both take to train
the same steps, ``Σ_i T_c(i) / Σ_i T_hydraulis(i)`` (= the ratio of mean step times).
Worked example: step times (100, 300) ms for a baseline and (80, 200) ms for Hydraulis give
``400 / 280 = 1.43×`` (the mean of per-step ratios, 1.38, would weigh the short step as much
as the long one).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hydraulis.dispatch import MethodSummary, summarise_plans
from hydraulis.simulation.contenders import Contender
from hydraulis.simulation.simulate import Simulation


@dataclass(frozen=True)
class ContenderSummary:
    """One contender over the simulation: what it ran (``strategy``, chosen among
    ``candidates``), its figures, and Hydraulis' ``speedup`` over it."""

    contender: Contender
    strategy: str
    candidates: int
    figures: MethodSummary
    speedup: float


def summarise(simulation: Simulation) -> tuple[ContenderSummary, ...]:
    """One summary per run, in :class:`Contender` order."""
    work_bounds = np.array([s.work_bound_ms for s in simulation.steps])
    reference_ms = simulation.run(Contender.HYDRAULIS).predicted_ms.mean()
    return tuple(
        ContenderSummary(run.contender, run.strategy, run.candidates,
                         summarise_plans(run.contender.method, run.outcomes, work_bounds, len(run.proposal.strategies)),
                         float(run.predicted_ms.mean() / reference_ms))
        for run in simulation.runs
    )

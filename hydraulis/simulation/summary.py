"""A simulation in a few numbers per contender, and Hydraulis' speed-up over each.

Per contender over the ``n`` simulated steps (:func:`hydraulis.dispatch.summarise_plans`): mean
and median predicted step time ``T``; the ratio ``T/LB`` to the plan's own lower bound (how
close dispatch came to what its strategies allow, :mod:`hydraulis.dispatch.dispatcher`) —
median and 90th percentile; the ratio ``T/LB_work`` to design §6's work bound over every usable
scheme (one yardstick for all contenders) — median; the planning wall time per step — median
and 90th percentile; how often each strategy of its proposal ran.

**Speed-up** of Hydraulis over a contender ``c`` is the ratio of the time both take to train
the same steps, ``Σ_i T_c(i) / Σ_i T_hydraulis(i)`` (= the ratio of mean step times).
Worked example: step times (100, 300) ms for a baseline and (80, 200) ms for Hydraulis give
``400 / 280 = 1.43×`` (the mean of per-step ratios, 1.38, would weigh the short step as much
as the long one).

**Hydraulis against the bounds** (:func:`gap_summary`): medians over the steps of design §6's
pool bound ``max(work, longest)`` and of the tight bound (:mod:`hydraulis.cost.bound`), of
Hydraulis' predicted step time and of its compute part (without reduction and switch) over
them, and of each term of its gap (:mod:`hydraulis.dispatch.gap`).
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


@dataclass(frozen=True)
class GapSummary:
    """Medians over the steps (module docstring); ``parts`` is ``(term, ms)`` per gap term;
    ``exposed_reduction_share`` the exposed reduction over the step time, summed over the steps
    (design §6.3)."""

    pool_ms: float
    tight_ms: float
    predicted_over_pool: float
    compute_over_pool: float
    predicted_over_tight: float
    parts: tuple[tuple[str, float], ...]
    exposed_reduction_share: float


def gap_summary(simulation: Simulation) -> GapSummary:
    """Hydraulis against the bounds over ``simulation``'s steps."""
    pool = np.array([s.pool_bound_ms for s in simulation.steps])
    tight = np.array([s.tight_bound_ms for s in simulation.steps])
    predicted = np.array([g.predicted_ms for g in simulation.gaps])
    compute = np.array([g.predicted_ms - g.reduction_ms - g.switch_ms for g in simulation.gaps])
    names = [name for name, _ in simulation.gaps[0].parts()]
    return GapSummary(float(np.median(pool)), float(np.median(tight)), float(np.median(predicted / pool)),
                      float(np.median(compute / pool)), float(np.median(predicted / tight)),
                      tuple((name, float(np.median([dict(g.parts())[name] for g in simulation.gaps])))
                            for name in names),
                      float(sum(g.reduction_ms for g in simulation.gaps) / predicted.sum()))

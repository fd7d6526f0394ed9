"""One sampled step under every contender: Hydraulis' step plan with its exact 1F1B timelines,
and Hydraulis' speed-up over each baseline on that step (what the plan explorer shows).

Recipe of :func:`compare_step`:

1. draw one global batch from the documents with ``seed`` (:func:`hydraulis.base.workload.sample_batches`:
   pieces cut to the proposal's maximum length ``S``, filled to its token budget ``T``);
2. list the candidates of every contender family (:func:`~.contenders.contender_families`);
3. plan the batch with every candidate of every contender (:func:`hydraulis.dispatch.dispatch`
   with the contender's batching method; Hydraulis with :func:`hydraulis.dispatch.synthesis.plan_step`,
   which may make a strategy for the step from the proposal's schemes) and keep, per contender, the candidate with the lowest
   predicted step time on this batch — the strongest baseline of its kind for this step, chosen
   with hindsight (a simulation, :mod:`.simulate`, chooses over all its steps instead);
4. schedule Hydraulis' plan stage by stage (:func:`hydraulis.dispatch.pipeline_timelines`).

**Speed-up** of Hydraulis over contender ``c`` on the step is ``T_c / T_hydraulis``. Worked
example: the best homogeneous strategy with fixed packing predicts 1,300 ms, Hydraulis 1,000 ms:
1.30×.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hydraulis.base.types import Proposal, SchemeSpace, StepPlan
from hydraulis.base.workload import sample_batches
from hydraulis.cost import PipelineTimeline, lower_bound_ms
from hydraulis.dispatch import DispatchOptions, dispatch, micro_batch_times_ms, pipeline_timelines
from hydraulis.dispatch.synthesis import plan_step
from hydraulis.planner.options import proposal_options
from hydraulis.simulation.contenders import Contender, Family, contender_families


@dataclass(frozen=True)
class ContenderStep:
    """A contender on the step: what ran (``strategy``), its predicted step time, its plan's
    lower bound and Hydraulis' ``speedup`` over it."""

    contender: Contender
    strategy: str
    predicted_ms: float
    lower_bound_ms: float
    speedup: float


@dataclass(frozen=True)
class StepComparison:
    """The sampled batch (``lengths``, one per sequence), design §6's work bound over every
    usable scheme, Hydraulis' ``plan`` with each pipeline's per-stage micro-batch times and
    1F1B ``timelines`` (in ``plan.pipelines`` order), and every contender in
    :class:`Contender` order."""

    seed: int
    lengths: tuple[int, ...]
    work_bound_ms: float
    plan: StepPlan
    micro_batch_ms: tuple[tuple[float, ...], ...]
    timelines: tuple[PipelineTimeline, ...]
    contenders: tuple[ContenderStep, ...]


def compare_step(space: SchemeSpace, proposal: Proposal, documents: Sequence[int] | np.ndarray, seed: int = 0,
                 options: DispatchOptions = DispatchOptions()) -> StepComparison:
    """The recipe of the module docstring for one batch drawn from ``documents`` with ``seed``."""
    batch = sample_batches(documents, proposal.token_budget, 1, proposal.max_seq_len, seed)[0]
    usable = proposal_options(space, proposal)
    families = contender_families(space, proposal, usable)
    best = {contender: _best_plan(families[contender.family], batch, contender, options) for contender in Contender}
    plan = best[Contender.HYDRAULIS][1]
    reference_ms = plan.predicted_ms
    contenders = tuple(
        ContenderStep(contender, _strategy_name(contender, candidate, chosen), chosen.predicted_ms,
                      chosen.lower_bound_ms, chosen.predicted_ms / reference_ms)
        for contender, (candidate, chosen) in best.items()
    )
    work_bound = lower_bound_ms(batch, [(o.scheme, o.time, o.capacity) for o in usable], proposal.devices)
    times = tuple(tuple(t) for t in micro_batch_times_ms(plan, plan.strategy(proposal)))
    return StepComparison(seed, tuple(batch.tolist()), work_bound, plan, times, pipeline_timelines(plan, proposal),
                          contenders)


def _best_plan(candidates: Sequence[Proposal], batch: np.ndarray, contender: Contender,
               options: DispatchOptions) -> tuple[Proposal, StepPlan]:
    """The candidate whose plan of ``batch`` predicts the shortest step (the first on ties)."""
    plans = [(candidate, plan_step(candidate, batch, contender.method, options) if contender is Contender.HYDRAULIS
              else dispatch(candidate, batch, contender.method, options)) for candidate in candidates]
    return min(plans, key=lambda pair: pair[1].predicted_ms)


def _strategy_name(contender: Contender, candidate: Proposal, plan: StepPlan) -> str:
    strategy = plan.strategy(candidate)
    if plan.synthesis is not None:
        return f"made for the step: {strategy}"
    if contender.family is Family.PROPOSAL:
        return f"strategy {plan.strategy_index}: {strategy}"
    return str(strategy)

"""Why a plan is slower than the bound: its predicted step time cut into parts that add up.

For a plan of a batch on ``N`` devices, pipeline ``p`` of scheme ``k_p`` (``D_p`` devices) holds
pieces ``i ∈ p`` packed into ``v_p`` micro-batches; its stages are busy ``B_p = W_p + v_p·c_p``
(``W_p = Σ_{i∈p} w_{k_p}(s_i)``) and it ends at ``T_p`` (exact 1F1B). With ``K`` the pool of
schemes (the scheme space's, or the proposal's) and ``S`` the plan's strategy::

    predicted = work + strategy set + off-cheapest + fixed costs + imbalance + bubbles
                + reduction + switch

The details: :func:`gap_breakdown`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np

from hydraulis.base.types import PipelineGroup, Proposal, StepPlan
from hydraulis.cost import BoundScheme, LevelBound, level_bounds, step_bound
from hydraulis.dispatch.device_bound import ComputeForm, least_compute_ms
from hydraulis.dispatch.menu import menu, scheme_reduce_ms
from hydraulis.dispatch.summary import micro_batch_times_ms


@dataclass(frozen=True)
class GapBreakdown:
    """The terms of :func:`gap_breakdown`, in ms; they add up to ``predicted_ms``."""

    work_ms: float
    strategy_set_ms: float
    off_cheapest_ms: float
    fixed_ms: float
    imbalance_ms: float
    bubbles_ms: float
    reduction_ms: float
    switch_ms: float

    @property
    def predicted_ms(self) -> float:
        return sum(getattr(self, f.name) for f in fields(self))

    def parts(self) -> tuple[tuple[str, float], ...]:
        """``(name, ms)`` per term, in :func:`gap_breakdown`'s order."""
        return tuple((f.name.removesuffix("_ms").replace("_", " "), getattr(self, f.name)) for f in fields(self))


def bound_schemes(proposal: Proposal, schemes: Sequence[PipelineGroup] = ()) -> tuple[BoundScheme, ...]:
    """The pool of a plan made under ``proposal``: its schemes and ``schemes`` (e.g. the scheme
    space's, :func:`hydraulis.planner.options.synthesis_schemes`), each with its reduction."""
    return tuple(BoundScheme(g.scheme, g.time, g.max_seq_len, scheme_reduce_ms(proposal, g))
                 for g in menu(proposal, schemes))


def gap_breakdown(plan: StepPlan, proposal: Proposal, pool: Sequence[BoundScheme]) -> GapBreakdown:
    """The breakdown of ``plan`` (made under ``proposal``) against the schemes ``pool``.

        work          = Σ_i min_{k∈K} D_k·w_k(s_i) / N              design §6's work bound
        strategy set  = Σ_i min_{k∈S} D_k·w_k(s_i) / N − work        the strategy's schemes are dearer
        off-cheapest  = Σ_p D_p·W_p / N − Σ_i min_{k∈S} D_k·w_k(s_i) / N
                                                                     pieces not on their strategy's cheapest scheme
        fixed costs   = Σ_p D_p·v_p·c_p / N                         per-micro-batch overheads
        imbalance     = max_p B_p − Σ_p D_p·B_p / N                 the busiest pipeline over the mean
                                                                     (idle devices included)
        bubbles       = max_p T_p − max_p B_p                        1F1B fill and drain
        reduction, switch                                            the plan's (switch: new communicators)

    The first six add up to the compute part ``max_p T_p``, term by term (each sum telescopes).
    Every term is ≥ 0 but the first two when ``K`` lacks a scheme of ``S``. ``imbalance`` also
    carries a long sequence that its pipeline must run alone: compare with the longest-sequence
    bound (:mod:`hydraulis.cost.bound`).

    :func:`level_compute` says how far the compute part is from what *any* plan at the same
    reduction level needs (design §8.2): the closed form and the linear program of
    :mod:`hydraulis.dispatch.device_bound`.

    Worked example: two (1,1,1) pipelines (``w(s) = s``, ``c = 1``) on N = 2, pieces (3) and (1):
    work = (3 + 1)/2 = 2, fixed = (1 + 1)/2 = 1, busy (4, 2): imbalance = 4 − 3 = 1, no bubbles:
    2 + 0 + 0 + 1 + 1 + 0 = 4 = the slower pipeline.
    """
    strategy = plan.strategy(proposal)
    groups = strategy.expanded()
    devices = proposal.devices
    times = micro_batch_times_ms(plan, plan.strategy(proposal))
    pieces = plan.pipelines.micro_batches.aligned_lengths(plan.alignment)
    kinds = {(g.scheme, g.time, g.max_seq_len) for g in strategy.pipelines}
    mine = [BoundScheme(s, t, c) for s, t, c in sorted(kinds, key=lambda k: (k[0], k[2]))]
    busy = np.array([sum(t) for t in times])
    fixed = np.array([len(t) * g.time.c for t, g in zip(times, groups)])
    size = np.array([g.scheme.devices for g in groups], dtype=np.float64)
    compute = max((p.predicted_ms for p in plan.pipelines), default=0.0)
    work = step_bound(pieces, [*pool, *mine], devices).work_ms
    cheapest_here = step_bound(pieces, mine, devices).work_ms
    synthesis = plan.synthesis
    reduction = synthesis.reduce_ms if synthesis else proposal.strategies[plan.strategy_index].reduce_ms
    return GapBreakdown(
        work_ms=work,
        strategy_set_ms=cheapest_here - work,
        off_cheapest_ms=float(size @ (busy - fixed)) / devices - cheapest_here,
        fixed_ms=float(size @ fixed) / devices,
        imbalance_ms=float(busy.max(initial=0.0)) - float(size @ busy) / devices,
        bubbles_ms=compute - float(busy.max(initial=0.0)),
        reduction_ms=reduction,
        switch_ms=synthesis.switch_ms if synthesis else 0.0,
    )



@dataclass(frozen=True)
class LevelCompute:
    """What any plan whose schemes reduce in at most ``reduce_ms`` (the given plan's level) needs
    to compute the step, by the exact 1F1B: the closed form's ``closed_ms``
    (:func:`hydraulis.cost.level_bounds`) and the linear program's ``program_ms``
    (:mod:`hydraulis.dispatch.device_bound`, design §8.2)."""

    reduce_ms: float
    closed_ms: float
    program_ms: float


def level_compute(plan: StepPlan, proposal: Proposal, pool: Sequence[BoundScheme]) -> LevelCompute:
    """:class:`LevelCompute` at ``plan``'s level over ``pool`` (which must hold ``plan``'s schemes)."""
    pieces = plan.pipelines.micro_batches.aligned_lengths(plan.alignment).tolist()
    level = plan_level_ms(plan, proposal)
    closed = bound_at_level(level_bounds(pieces, pool, proposal.devices, proposal.pipeline_model.p2p_ms), level)
    program = least_compute_ms(pieces, pool, proposal.devices, level * (1 + 1e-9), ComputeForm.EXACT,
                               closed.compute_ms)
    return LevelCompute(level, closed.compute_ms, max(program, closed.compute_ms))


def plan_level_ms(plan: StepPlan, proposal: Proposal) -> float:
    """The reduction level of ``plan``: the largest ``r_k`` of its strategy's schemes."""
    return max(scheme_reduce_ms(proposal, g) for g in plan.strategy(proposal).pipelines)


def bound_at_level(levels: Sequence[LevelBound], reduce_ms: float) -> LevelBound:
    """The bound of the lowest level holding a plan that reduces in ``reduce_ms``."""
    return min((b for b in levels if b.reduce_ms >= reduce_ms * (1 - 1e-9)), key=lambda b: b.reduce_ms)

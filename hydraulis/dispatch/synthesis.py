"""A strategy made for every step: plan the step on the proposal, then look for a strategy —
counts of the proposal's schemes, or of the space's — that runs it faster, switch included
(design §8 and §8.2; the runtime switches strategies by redistribution, design §9).

The details: :func:`synthesise_step`; the search's pieces in :mod:`.synthesis_search`, the
estimate in :mod:`.fluid_estimate`, what steps pass on in :mod:`.synthesis_memory`."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from hydraulis.base.errors import HydraulisError, require, require_number
from hydraulis.base.limits import SYNTHESIS_EVALUATIONS
from hydraulis.base.placement import Communicator
from hydraulis.base.types import (
    SYNTHESIS_EVALUATIONS_DEFAULT,
    BatchingMethod,
    PipelineGroup,
    Proposal,
    SchemeSpace,
    StepPlan,
    Synthesis,
    Synthesise,
)
from hydraulis.dispatch.dispatcher import plan_proposal, prepare_dispatch, step_plan
from hydraulis.dispatch.options import DispatchOptions
from hydraulis.dispatch.synthesis_memory import SynthesisMemory
from hydraulis.dispatch.synthesis_search import SynthesisSearch, strategy_communicators
from hydraulis.planner.options import synthesis_schemes

ROUND_OFF = 1e-9
"""An incumbent within this fraction of the menu's lower bound is optimal: no search."""


@dataclass(frozen=True)
class SynthesisOptions:
    """How :func:`plan_step` synthesises: ``mode``; ``schemes`` the space's usable schemes as
    one-pipeline groups (``space`` mode; :func:`hydraulis.planner.options.synthesis_schemes`);
    ``evaluations`` the most strategies the dispatcher plans per step; ``wall_limit_ms`` a
    safety stop (reported when it acts)."""

    mode: Synthesise = Synthesise.PROPOSAL
    schemes: tuple[PipelineGroup, ...] = ()
    evaluations: int = SYNTHESIS_EVALUATIONS_DEFAULT
    wall_limit_ms: float = 5000.0

    def __post_init__(self) -> None:
        require(isinstance(self.mode, Synthesise), "synthesise", self.mode,
                f"must be one of {[m.value for m in Synthesise]}")
        require(self.mode is not Synthesise.SPACE or len(self.schemes) > 0, "synthesise", self.mode.value,
                "needs the scheme space's schemes (give the scheme space)")
        SYNTHESIS_EVALUATIONS.check(self.evaluations, "synthesis_evaluations")
        require(require_number(self.wall_limit_ms, "synthesis_wall_limit_ms") > 0, "synthesis_wall_limit_ms",
                self.wall_limit_ms, "must be > 0")


def synthesis_options(mode: Synthesise | str, evaluations: int, proposal: Proposal, space: SchemeSpace | None,
                      space_field: str = "scheme_space") -> SynthesisOptions:
    """Options for ``mode`` with the scheme space's usable schemes for ``proposal`` when the
    mode is ``space`` (which needs ``space``, named ``space_field`` in the error)."""
    kind = _mode(mode)
    if kind is Synthesise.SPACE and space is None:
        raise HydraulisError("synthesise", kind.value, f"needs the scheme space: give {space_field}")
    return SynthesisOptions(kind, synthesis_schemes(space, proposal) if kind is Synthesise.SPACE else (), evaluations)


def _mode(mode: Synthesise | str) -> Synthesise:
    try:
        return Synthesise(mode)
    except ValueError:
        raise HydraulisError("synthesise", mode, f"must be one of {[m.value for m in Synthesise]}") from None


def plan_step(proposal: Proposal, lengths: Sequence[int] | np.ndarray,
              method: BatchingMethod | str = BatchingMethod.DISPATCH_BALANCED_PACKING,
              options: DispatchOptions = DispatchOptions(), synthesis: SynthesisOptions = SynthesisOptions(),
              known: frozenset[Communicator] | None = None, memory: SynthesisMemory = SynthesisMemory()) -> StepPlan:
    """The plan of :func:`synthesise_step`, for a step planned alone (no memory passed on)."""
    return synthesise_step(proposal, lengths, method, options, synthesis, known, memory)[0]


def synthesise_step(proposal: Proposal, lengths: Sequence[int] | np.ndarray,
                    method: BatchingMethod | str = BatchingMethod.DISPATCH_BALANCED_PACKING,
                    options: DispatchOptions = DispatchOptions(), synthesis: SynthesisOptions = SynthesisOptions(),
                    known: frozenset[Communicator] | None = None,
                    memory: SynthesisMemory = SynthesisMemory()) -> tuple[StepPlan, SynthesisMemory]:
    """The step plan of ``lengths`` and the memory for the next step; ``known`` are the
    communicators the run has created (None: the proposal's strategies'), ``memory`` what
    earlier steps passed on (:class:`~hydraulis.dispatch.synthesis_memory.SynthesisMemory`).

    Recipe of :func:`synthesise_step`:

    1. dispatch the step on the proposal (:func:`~hydraulis.dispatch.dispatcher.plan_proposal`):
       the best proposal strategy's plan is the incumbent, its predicted step time ``T₀``;
    2. the *menu*: the proposal's schemes (``proposal`` mode) or also the space's (``space``),
       each with its capacity ``C_k``, devices ``D_k`` and reduction ``r_k``; a strategy is a
       count vector ``n`` over the menu (:mod:`.synthesis_search`). **Bound test**: when ``T₀``
       reaches the menu's tight lower bound (:func:`hydraulis.cost.step_bound`, within
       :data:`ROUND_OFF`), no strategy can beat it: stop, nothing planned;
    3. the candidates (:meth:`~.synthesis_search.SynthesisSearch.candidates`): the strategies
       the memory holds (the latest winner first: the previous step's answer is the warm start),
       the neighbours of the latest winner and of the incumbent (a few pipelines moved between
       schemes), and the *fluid answers* (:func:`~.menu.fluid_answers`, one per reduction level);
    4. rank them by ``κ·E(n) + σ(n)``: ``E`` the fluid estimate (:mod:`.fluid_estimate`), ``κ``
       the ratio plan/``E`` the memory holds for ``n`` (its parent's for a neighbour of the
       winner, the incumbent's ``T₀/E`` otherwise); none whose ``κ·E`` reaches ``T₀`` is ranked;
    5. plan them with the dispatcher in that order, at most ``evaluations``, until the estimate
       reaches the best step time so far; skip any that cannot beat the best by its bounds
       (``L + σ``, with the switch ``σ``, and the pieces' room,
       :meth:`~.synthesis_search.SynthesisSearch.could_beat`);
    6. keep the fastest if strictly faster than ``T₀`` (:class:`~hydraulis.base.step_plan.Synthesis`:
       strategy, reduction, switch, new communicators); the memory takes the planned strategies
       with their new ``κ`` and puts the winner first.

    **Worked example** (LLaMA-32B, 1,024 H100s, 1.6M tokens, examples/proposals/32b_1024dev.json,
    benchmarks/plan_step_latency.py's third step): ``T₀`` = 1,834.7 ms on the proposal's
    8×(8,8,1) + 32×(2,4,2); its neighbour 9×(8,8,1) + 28×(2,4,2) (four (2,4,2) pipelines' 64
    devices make one (8,8,1)) is among the first by ``κ·E`` and runs the step in 1,783.2 ms, two
    of 27 candidates planned (the 16-plan descent this replaced found 1,831.4 ms).

    **Budget.** At most ``evaluations`` dispatcher plans per step (the incumbent's is free), so a
    step's planning is deterministic and bounded; ``wall_limit_ms`` is only a safety stop, and a
    plan it cut short says so in its notes. **Never slower**: the synthesised plan is returned
    only when its predicted step time, switch included, is below ``T₀``
    (tests/dispatch/test_synthesis.py checks it on random instances). Its lower bound is step 2's
    menu bound, which every plan of a menu strategy — the proposal's included — respects.
    """
    started = time.perf_counter()
    method, batch = prepare_dispatch(proposal, lengths, method, options)
    best, lower_bound, notes = plan_proposal(proposal, batch, method, options)
    if synthesis.mode is Synthesise.OFF:
        return step_plan(batch, method, options, best, lower_bound, notes, started), memory
    known = proposal_communicators(proposal) if known is None else known
    extra = synthesis.schemes if synthesis.mode is Synthesise.SPACE else ()
    search = SynthesisSearch(proposal, batch, method, options, extra, known, best)
    lower_bound = search.menu_bound_ms()
    if best.predicted_ms <= lower_bound * (1.0 + ROUND_OFF):
        notes.append(f"synthesis: skipped, the proposal's {best.predicted_ms:.1f} ms is the menu's lower bound")
        return step_plan(batch, method, options, best, lower_bound, notes, started), memory
    found = search.candidates(memory)
    won, stopped = _plan_ranked(search, search.ranked(found), synthesis, started)
    notes.append(_note(search, won, found, stopped))
    memory = memory.after(search.remembered(), search.strategy(won) if won else None)
    if won is None:
        return step_plan(batch, method, options, best, lower_bound, notes, started), memory
    plan = search.plans[won]
    made = Synthesis(plan.candidate.strategy, plan.candidate.reduce_ms, search.switch[won], search.new[won],
                     best.predicted_ms, len(search.plans), found[won][0])
    return step_plan(batch, method, options, plan, lower_bound, notes, started, made), memory


def proposal_communicators(proposal: Proposal) -> frozenset[Communicator]:
    """The communicators of every proposal strategy (warmed before a run's first step)."""
    return frozenset().union(*(strategy_communicators(p.strategy) for p in proposal.strategies))


def _plan_ranked(search: SynthesisSearch, ranked: Iterable[tuple[float, tuple[int, ...]]], synthesis: SynthesisOptions,
                 started: float) -> tuple[tuple[int, ...] | None, bool]:
    """Step 5: the counts of the fastest plan if it beats ``T₀`` (else None), and whether the
    wall-clock safety limit stopped the planning."""
    deadline = started + synthesis.wall_limit_ms / 1e3
    won, best = None, search.value[search.start]
    for estimate, counts in ranked:
        if len(search.plans) >= synthesis.evaluations or estimate >= best:
            break
        if search.least(counts) >= best or not search.could_beat(counts, best):
            continue
        if time.perf_counter() > deadline:
            return won, True
        if search.plan(counts) < best:
            won, best = counts, search.value[counts]
    return won, False


def _note(search: SynthesisSearch, won: tuple[int, ...] | None, found: dict, stopped: bool) -> str:
    stop = ", stopped by the wall-clock safety limit" if stopped else ""
    start = search.value[search.start]
    if won is None:
        best = min((search.value[n] for n in search.plans), default=None)
        tried = f" (best {best:.1f} ms)" if best is not None else ", by their bounds"
        return (f"synthesis: {len(search.plans)} of {len(found)} candidates planned, none beat the proposal's "
                f"{start:.1f} ms{tried}{stop}")
    return (f"synthesis: {search.strategy(won)} from the {found[won][0]} {search.value[won]:.1f} ms "
            f"(switch {search.switch[won]:.1f} ms, {search.new[won]} new communicators) against the proposal's "
            f"{start:.1f} ms; {len(search.plans)} of {len(found)} candidates planned{stop}")

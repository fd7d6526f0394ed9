"""A strategy made for every step: plan the step on the proposal, then look for a strategy —
counts of the proposal's schemes, or of the space's — that runs it faster, switch included
(design §8 and §8.2; the runtime switches strategies by redistribution, design §9).

The details: :func:`plan_step`."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from hydraulis.cost import BoundScheme, exposed_reduce_ms, reduction_model, step_bound
from hydraulis.dispatch.batch import Batch
from hydraulis.dispatch.dispatcher import (
    Candidate,
    StrategyPlan,
    plan_candidate,
    plan_proposal,
    prepare_dispatch,
    step_plan,
)
from hydraulis.dispatch.menu import MenuCosts, fluid_answers, menu, scheme_reduce_ms
from hydraulis.dispatch.options import DispatchOptions
from hydraulis.dispatch.pipelines import PipelineTable
from hydraulis.errors import HydraulisError, require, require_number
from hydraulis.limits import SYNTHESIS_EVALUATIONS
from hydraulis.placement import Communicator, communicators, placement_problem
from hydraulis.planner.options import synthesis_schemes
from hydraulis.planner.search import IMPROVEMENT, CountsSearch
from hydraulis.types import (
    SYNTHESIS_EVALUATIONS_DEFAULT,
    BatchingMethod,
    PipelineGroup,
    Proposal,
    SchemeSpace,
    StepPlan,
    Strategy,
    Synthesis,
    Synthesise,
)

ACTIVE_SCHEMES = 8
"""In ``space`` mode the descents move devices to at most this many schemes."""
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
              known: frozenset[Communicator] | None = None) -> StepPlan:
    """The recipe of :func:`plan_step`; ``known`` are the communicators the run has
    created (None: the proposal's strategies').

    Recipe of :func:`plan_step`:

    1. dispatch the step on the proposal (:func:`~hydraulis.dispatch.dispatcher.plan_proposal`):
       the best proposal strategy's plan is the incumbent, its predicted step time ``T₀``;
    2. the *menu*: the proposal's schemes (``proposal`` mode) or also the space's (``space``), each
       with its capacity ``C_k``, devices ``D_k`` and reduction ``r_k``; a strategy is a count vector
       ``n`` over the menu, placeable (:func:`hydraulis.placement.placement_problem`) and holding the
       longest piece;
    3. the objective of ``n``: the real dispatcher's predicted step time of the step on ``n``
       (:func:`~hydraulis.dispatch.dispatcher.plan_candidate`: compute and reduction) plus the
       switch, ``σ(n) = |communicators(n) ∖ known|·t_comm`` (:mod:`hydraulis.placement`; ``known``:
       the proposal's strategies' communicators and those earlier steps created);
    4. warm starts: the incumbent, the *fluid answers* (below, one per reduction level) and the
       other proposal strategies;
    5. descents (the moves of :class:`hydraulis.planner.search.CountsSearch`: shift ``Δ`` devices
       between schemes, ``Δ = N/2, N/4, …``): at each ``Δ`` the neighbours are ranked by a cheap
       lower bound ``L(n) + σ(n)`` (spread work with fixed costs over ``n``'s devices, the longest
       piece's crossing, plus the reduction, plus the switch — known before planning) and planned by
       the dispatcher in that order until the bound reaches the best neighbour found — so the best
       neighbour is found exactly with few plans, and none is spent on a strategy whose new
       communicators alone cost more than it could gain; move to it
       while it gains more than ``ε`` (:data:`hydraulis.planner.search.IMPROVEMENT`), then halve ``Δ``;
    6. keep the synthesised strategy only if it is strictly faster than ``T₀``; the plan records it
       (:class:`~hydraulis.step_plan.Synthesis`: strategy, reduction, switch, new communicators). Its lower
       bound is the tight bound over the menu (:func:`hydraulis.cost.step_bound`), which every plan
       of a menu strategy — the proposal's included — respects.

    **Nothing to gain.** When ``T₀`` already reaches the menu's lower bound (step 6's, within
    :data:`ROUND_OFF`: float round-off), no strategy of the menu can beat it and steps 4–5 are
    skipped — the common case at scale, where the longest sequence's crossing decides the step
    (LLaMA-70B, 8,192 devices, 131K pieces: ``T₀`` = bound = 6,408.8 ms).

    **Budget.** At most ``evaluations`` dispatcher plans per step (the incumbent's is free), so a
    step's planning is deterministic and bounded; ``wall_limit_ms`` is only a safety stop, and a
    plan it cut short says so in its notes.

    **Fluid answer** (:mod:`hydraulis.dispatch.menu`, with what each menu scheme costs on
    the step's pieces): per reduction level, the counts at the least compute time at which every
    piece goes to the scheme with its least device share, pipelines filled to their 1F1B room; the
    active schemes only (below), and schemes whose reduction plus the step's compute floor reaches
    ``T₀`` are left out.

    **Never slower.** The synthesised plan is returned only when its predicted step time, switch
    included, is below the incumbent's, so ``plan_step`` never predicts a slower step than the best
    proposal strategy (tests/dispatch/test_synthesis.py checks it on random instances).
    """
    started = time.perf_counter()
    method, batch = prepare_dispatch(proposal, lengths, method, options)
    best, lower_bound, notes = plan_proposal(proposal, batch, method, options)
    if synthesis.mode is Synthesise.OFF:
        return step_plan(batch, method, options, best, lower_bound, notes, started)
    known = proposal_communicators(proposal) if known is None else known
    search = _Search(proposal, batch, method, options, synthesis, known, best, started)
    lower_bound = search.menu_bound_ms()
    if best.predicted_ms <= lower_bound * (1.0 + ROUND_OFF):
        notes.append(f"synthesis: skipped, the proposal's {best.predicted_ms:.1f} ms is the menu's lower bound")
        return step_plan(batch, method, options, best, lower_bound, notes, started)
    found = search.run()
    notes.append(search.note(found))
    if found is None:
        return step_plan(batch, method, options, best, lower_bound, notes, started)
    plan, switch, new = search.plans[found], search.switch[found], search.new[found]
    made = Synthesis(plan.candidate.strategy, plan.candidate.reduce_ms, switch, new, best.predicted_ms,
                     search.evaluations, search.origin[found])
    return step_plan(batch, method, options, plan, lower_bound, notes, started, made)


def proposal_communicators(proposal: Proposal) -> frozenset[Communicator]:
    """The communicators of every proposal strategy (warmed before a run's first step)."""
    return frozenset().union(*(strategy_communicators(p.strategy) for p in proposal.strategies))


@lru_cache(maxsize=1024)
def strategy_communicators(strategy: Strategy) -> frozenset[Communicator]:
    """:func:`hydraulis.placement.communicators` of ``strategy``'s pipelines."""
    return communicators([g.scheme for g in strategy.expanded()])


class _Search:
    """The menu, the objective, the starts and the descents of :func:`plan_step` for one step."""

    def __init__(self, proposal: Proposal, batch: Batch, method: BatchingMethod, options: DispatchOptions,
                 synthesis: SynthesisOptions, known: frozenset[Communicator], incumbent: StrategyPlan,
                 started: float) -> None:
        self.proposal, self.batch, self.method, self.options = proposal, batch, method, options
        self.known, self.incumbent = known, incumbent
        self.deadline = started + synthesis.wall_limit_ms / 1e3
        self.left, self.evaluations, self.stopped = synthesis.evaluations, 0, False
        self.menu = menu(proposal, synthesis.schemes if synthesis.mode is Synthesise.SPACE else ())
        reduce = np.array([scheme_reduce_ms(proposal, g) for g in self.menu])
        self.costs = MenuCosts.of(self.menu, batch.tokens, reduce, proposal.pipeline_model.p2p_ms)
        self.floor = self.costs.floor_ms(proposal.devices)
        self.useful = self.costs.reduce + self.floor < incumbent.predicted_ms
        self.bounds: dict[tuple[int, ...], float] = {}
        self.value: dict[tuple[int, ...], float] = {}
        self.plans: dict[tuple[int, ...], StrategyPlan] = {}
        self.switch: dict[tuple[int, ...], float] = {}
        self.new: dict[tuple[int, ...], int] = {}
        self.origin: dict[tuple[int, ...], str] = {}
        self.start = self._counts(incumbent.candidate.strategy)
        self.value[self.start] = incumbent.predicted_ms
        self.moves = CountsSearch(self.costs.size.tolist(), proposal.devices, self._active(), self.objective,
                                  synthesis.evaluations)

    def run(self) -> tuple[int, ...] | None:
        """Descents from the starts while the budget lasts; the best counts found if they beat
        the incumbent, else None."""
        for counts, origin in self._starts():
            self.origin.setdefault(counts, origin)
            if not self.left and counts not in self.value:
                break
            self._descend(counts)
        best = min(self.value, key=lambda n: (self.value[n], n))
        return best if best != self.start and self.value[best] < self.value[self.start] else None

    def objective(self, counts: tuple[int, ...]) -> float:
        """Predicted step time of ``counts`` with its switch (∞ when not a valid strategy);
        one dispatcher plan, counted against the budget."""
        if counts in self.value:
            return self.value[counts]
        if not np.isfinite(self.lower(counts)):
            self.value[counts] = math.inf
            return math.inf
        strategy = self.strategy(counts)
        table = PipelineTable.of(strategy, self.proposal.pipeline_model)
        reduction = self._reduction(strategy)
        option = Candidate(strategy, -1, table, table.work(self.batch.tokens), self.lower(counts), reduction)
        plan = plan_candidate(option, self.batch, self.method, self.options, self.proposal.max_seq_len)
        self.left -= 1
        self.evaluations += 1
        self.plans[counts] = plan
        self.value[counts] = plan.predicted_ms + self.switch_ms(counts)
        return self.value[counts]

    def switch_ms(self, counts: tuple[int, ...]) -> float:
        """``σ(n)``: ``n``'s communicators not yet known times ``t_comm`` (known before any
        plan, so it joins ``L(n)`` in ranking and pruning); memoised."""
        if counts not in self.switch:
            self.new[counts] = len(strategy_communicators(self.strategy(counts)) - self.known)
            self.switch[counts] = self.new[counts] * self.proposal.communicator_ms
        return self.switch[counts]

    def least(self, counts: tuple[int, ...]) -> float:
        """``L(n) + σ(n)``: no plan on ``n`` with its switch takes less (∞ when ``n`` is not a
        valid strategy)."""
        lower = self.lower(counts)
        return lower + self.switch_ms(counts) if np.isfinite(lower) else math.inf

    def lower(self, counts: tuple[int, ...]) -> float:
        """``L(n)``: spread work with fixed costs over ``n``'s devices, the longest piece's
        crossing, plus the reduction (∞ when ``n`` cannot hold a piece or be placed); memoised."""
        if counts not in self.bounds:
            self.bounds[counts] = self._lower(counts)
        return self.bounds[counts]

    def _lower(self, counts: tuple[int, ...]) -> float:
        n = np.asarray(counts)
        used = n > 0
        sizes = np.repeat(self.costs.size, n).tolist()
        if not used.any() or placement_problem(sizes, self.proposal.devices, self.proposal.devices_per_node):
            return math.inf
        solo = n.sum() == 1 and self.proposal.optimizer_layout.dp == 1
        return self._compute_floor(counts) + (0.0 if solo else float(self.costs.reduce[used].max()))

    def could_beat(self, counts: tuple[int, ...], value: float) -> bool:
        """Whether a plan on ``counts`` could take less than ``value``: with the reduction
        ``ρ`` and the switch ``σ`` taken, in compute time ``T = value − ρ − σ`` every piece
        needs a scheme of ``n`` that finishes it alone in ``T`` (``pp·(c + w) ≤ T``); the
        pieces' least device time must fit ``Σ_k n_k·D_k·(T − pp_k·c_k)``; and the pieces
        only one scheme ``k`` finishes in time must fit its ``n_k`` pipelines — their work
        within ``n_k·(T − pp_k·c_k)``, at most ``n_k`` of them above half of ``T − pp_k·c_k``
        (two of those cannot share a pipeline)."""
        n = np.asarray(counts)
        used = np.flatnonzero(n > 0)
        compute = value - (self.lower(counts) - self._compute_floor(counts)) - self.switch_ms(counts)
        room = compute - self.costs.pp[used] * self.costs.c[used]
        can = self.costs.fits[used] & (self.costs.crossing[used] <= compute) & (room > 0)[:, None]
        if not can.any(axis=0).all():
            return False
        size, work = self.costs.size[used], self.costs.work[used]
        device_time = np.where(can, size[:, None] * work, np.inf).min(axis=0).sum()
        if device_time > float((n[used] * size) @ np.maximum(room, 0.0)):
            return False
        only = can & (can.sum(axis=0) == 1)[None, :]
        forced = np.where(only, work, 0.0)
        halves = (only & (work > room[:, None] / 2)).sum(axis=1)
        return bool(np.all(forced.sum(axis=1) <= n[used] * room) and np.all(halves <= n[used]))

    def _compute_floor(self, counts: tuple[int, ...]) -> float:
        """``L(n)`` without its reduction."""
        n = np.asarray(counts)
        used = n > 0
        spread = self.costs.spread[used].min(axis=0).sum() / float(n @ self.costs.size)
        return float(max(spread, np.where(self.costs.fits[used, 0], self.costs.crossing[used, 0], np.inf).min()))

    def strategy(self, counts: tuple[int, ...]) -> Strategy:
        """The strategy of ``counts``, longest-holding groups first."""
        groups = [PipelineGroup(g.scheme, int(n), g.max_seq_len, g.time) for g, n in zip(self.menu, counts) if n > 0]
        return Strategy(tuple(sorted(groups, key=lambda g: (-g.max_seq_len, g.scheme))))

    def menu_bound_ms(self) -> float:
        """No strategy of the menu runs the step faster: :func:`hydraulis.cost.step_bound`'s
        tight bound over the useful schemes; a strategy using another scheme ``k`` takes at
        least ``r_k`` plus the menu's compute floor."""
        schemes = [BoundScheme(g.scheme, g.time, g.max_seq_len, r)
                   for g, r, useful in zip(self.menu, self.costs.reduce, self.useful) if useful]
        others = self.costs.reduce[~self.useful].min(initial=math.inf) + self.floor
        if not schemes or not self.costs.fits[self.useful].any(axis=0).all():
            return float(others)
        tight = step_bound(self.batch.tokens, schemes, self.proposal.devices, self.proposal.pipeline_model.p2p_ms,
                           self.proposal.optimizer_layout.dp == 1).tight_ms
        return float(min(tight, others))

    def note(self, found: tuple[int, ...] | None) -> str:
        stop = ", stopped by the wall-clock safety limit" if self.stopped else ""
        if found is None:
            best = min((v for n, v in self.value.items() if n != self.start), default=math.inf)
            tried = f" (best {best:.1f} ms)" if np.isfinite(best) else ", by their bounds"
            return (f"synthesis: {self.evaluations} strategies planned, none beat the proposal's "
                    f"{self.value[self.start]:.1f} ms{tried}{stop}")
        return (f"synthesis: {self.strategy(found)} from the {self.origin.get(found, 'descent')} "
                f"{self.value[found]:.1f} ms (switch {self.switch[found]:.1f} ms, {self.new[found]} new communicators) "
                f"against the proposal's {self.value[self.start]:.1f} ms; {self.evaluations} strategies planned{stop}")

    def _descend(self, start: tuple[int, ...]) -> None:
        current, current_ms = start, self.objective(start)
        if not np.isfinite(current_ms):
            return
        for delta in self.moves.step_sizes():
            while True:
                step = self._best_neighbour(current, current_ms, delta)
                if step is None:
                    break
                current, current_ms = step

    def _best_neighbour(self, current: tuple[int, ...], current_ms: float,
                        delta: int) -> tuple[tuple[int, ...], float] | None:
        """The best neighbour at ``delta`` if it gains more than ``ε``: neighbours planned in
        increasing ``L + σ`` until it reaches the best found (within the budget)."""
        target = current_ms * (1.0 - IMPROVEMENT)
        ranked = sorted((self.least(n), n) for n in self.moves.neighbours(current, delta))
        best: tuple[tuple[int, ...], float] | None = None
        for bound, counts in ranked:
            beat = best[1] if best else target
            if bound >= beat:
                break
            if counts not in self.value and not self.could_beat(counts, beat):
                continue
            if counts not in self.value:
                if not self.left:
                    break
                if time.perf_counter() > self.deadline:
                    self.stopped, self.left = True, 0
                    break
            self.origin.setdefault(counts, self.origin.get(current, "descent"))
            value = self.objective(counts)
            if value < (best[1] if best else target):
                best = (counts, value)
        return best

    def _starts(self) -> list[tuple[tuple[int, ...], str]]:
        """The incumbent, then the fluid answers and the other proposal strategies whose
        ``L + σ`` is below ``T₀`` (the others cannot beat it), by ``L + σ``."""
        others = [(self._counts(p.strategy), f"proposal strategy {i}") for i, p in enumerate(self.proposal.strategies)
                  if i != self.incumbent.candidate.index]
        ranked = sorted(self._fluid() + others, key=lambda s: self.least(s[0]))
        return [(self.start, f"proposal strategy {self.incumbent.candidate.index}")] + [
            s for s in ranked if self.least(s[0]) < self.value[self.start]]

    def _fluid(self) -> list[tuple[tuple[int, ...], str]]:
        """The fluid answers over the active schemes whose ``T + ρ`` is below ``T₀``."""
        active = np.zeros(len(self.menu), dtype=bool)
        active[list(self.moves.active)] = True
        return fluid_answers(self.costs, active, self.floor, self.value[self.start], self.proposal.devices)

    def _active(self) -> list[int]:
        """The useful schemes (``r_k`` plus the compute floor below ``T₀``), at most
        :data:`ACTIVE_SCHEMES`: those of the proposal strategies, the fastest for the longest
        piece, then the cheapest for this step's pieces."""
        useful = np.flatnonzero(self.useful)
        if useful.size <= ACTIVE_SCHEMES:
            return useful.tolist()
        held = np.isfinite(self.costs.spread)
        spread = self.costs.spread
        excess = np.where(held, spread / spread.min(axis=0), 0.0).sum(axis=1) / np.maximum(held.sum(axis=1), 1)
        chosen = {int(k) for p in self.proposal.strategies for k in np.flatnonzero(self._counts(p.strategy))
                  if self.useful[k]}
        holders = useful[self.costs.fits[useful, 0]]
        if holders.size:
            chosen.add(int(holders[np.argmin(self.costs.crossing[holders, 0])]))
        for k in useful[np.argsort(excess[useful], kind="stable")]:
            if len(chosen) >= ACTIVE_SCHEMES:
                break
            chosen.add(int(k))
        return sorted(chosen)

    def _counts(self, strategy: Strategy) -> tuple[int, ...]:
        index = {(g.scheme, g.max_seq_len, g.time): k for k, g in enumerate(self.menu)}
        counts = [0] * len(self.menu)
        for g in strategy.pipelines:
            counts[index[(g.scheme, g.max_seq_len, g.time)]] += g.count
        return tuple(counts)

    def _reduction(self, strategy: Strategy) -> float:
        return exposed_reduce_ms(self.proposal.model.params, strategy.expanded(), self.proposal.optimizer_layout,
                                 reduction_model(self.proposal))


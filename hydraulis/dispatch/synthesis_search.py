"""One step's synthesis search (:func:`hydraulis.dispatch.synthesis.plan_step`): the menu and
what its schemes cost on the step, the candidate counts, their bounds, estimates and switches,
and the dispatcher's plans of the few it plans.

A strategy is a count vector ``n`` over the menu. Per ``n``: the bound ``L(n)`` (spread work with
fixed costs over ``n``'s devices, the longest piece's crossing, plus the reduction), the switch
``σ(n) = |communicators(n) ∖ known|·t_comm``, the fluid estimate ``E(n)``
(:mod:`hydraulis.dispatch.fluid_estimate`) and, once planned, the dispatcher's predicted step
time plus ``σ(n)``.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator
from functools import lru_cache

import numpy as np

from hydraulis.base.placement import Communicator, communicators, placement_problem
from hydraulis.base.types import BatchingMethod, PipelineGroup, Proposal, Strategy
from hydraulis.cost import BoundScheme, step_bound
from hydraulis.dispatch.batch import Batch
from hydraulis.dispatch.dispatcher import Candidate, StrategyPlan, plan_candidate
from hydraulis.dispatch.fluid_estimate import fluid_step_ms, piece_groups
from hydraulis.dispatch.menu import MenuCosts, fluid_answers, menu, scheme_reduce_ms
from hydraulis.dispatch.options import DispatchOptions
from hydraulis.dispatch.pipelines import PipelineTable
from hydraulis.dispatch.synthesis_memory import Remembered, SynthesisMemory
from hydraulis.planner.search import CountsSearch

ACTIVE_SCHEMES = 8
"""Neighbours and fluid answers use at most this many schemes."""
NEIGHBOUR_STEPS = 2
"""Neighbours of the latest winner and of the incumbent by moves of the 3 smallest sizes."""

Counts = tuple[int, ...]


class SynthesisSearch:
    """The menu, the candidates and the plans of one step's synthesis."""

    def __init__(self, proposal: Proposal, batch: Batch, method: BatchingMethod, options: DispatchOptions,
                 extra: tuple[PipelineGroup, ...], known: frozenset[Communicator], incumbent: StrategyPlan) -> None:
        self.proposal, self.batch, self.method, self.options = proposal, batch, method, options
        self.known, self.incumbent = known, incumbent
        self.menu = menu(proposal, extra)
        self.index = {(g.scheme, g.max_seq_len, g.time): k for k, g in enumerate(self.menu)}
        reduce = np.array([scheme_reduce_ms(proposal, g) for g in self.menu])
        self.costs = MenuCosts.of(self.menu, batch.tokens, reduce, proposal.pipeline_model.p2p_ms)
        lengths, self.repeats = np.unique(batch.tokens, return_counts=True)
        self.distinct = MenuCosts.of(self.menu, lengths, reduce, proposal.pipeline_model.p2p_ms)
        self.floor = self.costs.floor_ms(proposal.devices)
        self.useful = self.costs.reduce + self.floor < incumbent.predicted_ms
        self.solo_free = proposal.optimizer_layout.dp == 1
        self.start = self.counts(incumbent.candidate.strategy)
        self.value: dict[Counts, float] = {self.start: incumbent.predicted_ms}
        self.plans: dict[Counts, StrategyPlan] = {}
        self.estimate: dict[Counts, float] = {}
        self.bounds: dict[Counts, float] = {}
        self.switch: dict[Counts, float] = {}
        self.new: dict[Counts, int] = {}

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
                           self.solo_free).tight_ms
        return float(min(tight, others))

    def candidates(self, memory: SynthesisMemory) -> dict[Counts, tuple[str, float | None]]:
        """The remembered strategies on the menu, the neighbours of the latest winner and of
        the incumbent (moves of :class:`hydraulis.planner.search.CountsSearch` of the
        :data:`NEIGHBOUR_STEPS` smallest sizes, to the active schemes), then the fluid answers
        over the active schemes: origin and ratio ``κ`` (the remembered one, the winner's for
        its neighbours; None: the incumbent's), the incumbent left out."""
        found: dict[Counts, tuple[str, float | None]] = {}
        for entry in memory.entries:
            counts = self.counts(entry.strategy, strict=False)
            if counts is not None:
                found.setdefault(counts, ("remembered strategy", entry.ratio))
        active = self._active()
        moves = CountsSearch(self.costs.size.tolist(), self.proposal.devices, active, lambda n: math.inf, 0)
        first = next(iter(found.items()), None)
        starts = ([(first[0], "remembered strategy's neighbour", first[1][1])] if first else []) + [
            (self.start, "proposal strategy's neighbour", None)]
        for counts, origin, ratio in starts:
            for delta in moves.step_sizes()[-NEIGHBOUR_STEPS:]:
                for n in moves.neighbours(counts, delta):
                    found.setdefault(n, (origin, ratio))
        use = np.zeros(len(self.menu), dtype=bool)
        use[active] = True
        for counts, origin in fluid_answers(self.distinct, use, self.floor, self.incumbent.predicted_ms,
                                            self.proposal.devices, self.repeats):
            found.setdefault(counts, (origin, None))
        found.pop(self.start, None)
        return found

    def ranked(self, found: dict[Counts, tuple[str, float | None]]) -> Iterator[tuple[float, Counts]]:
        """The candidates by estimate ``κ·E(n) + σ(n)`` below ``T₀`` (``κ``: the candidate's, else
        the incumbent's ``T₀/E``), lazily: ``σ`` (placing the strategy's communicators) is
        computed only for a candidate whose ``κ·E`` is below every estimate yielded after it and
        below ``T₀``, and that holds every piece and can be placed (``L(n)`` finite)."""
        if not found:
            return
        ceiling = self.value[self.start]
        listed = [self.start, *found]
        fluid = fluid_step_ms(self.costs, piece_groups(self.costs, self.batch.tokens), listed, self.solo_free)
        self.estimate.update(zip(listed, fluid.tolist()))
        default = ceiling / self.estimate[self.start]
        scaled = sorted(((found[n][1] or default) * self.estimate[n], n) for n in found)
        waiting: list[tuple[float, Counts]] = []
        for estimate, n in scaled:
            if estimate >= ceiling:
                break
            while waiting and waiting[0][0] <= estimate:
                yield heapq.heappop(waiting)
            if np.isfinite(self.lower(n)):
                heapq.heappush(waiting, (estimate + self.switch_ms(n), n))
        while waiting:
            yield heapq.heappop(waiting)

    def plan(self, counts: Counts) -> float:
        """The dispatcher's predicted step time of ``counts`` with its switch (one plan)."""
        strategy = self.strategy(counts)
        table = PipelineTable.of(strategy, self.proposal.pipeline_model)
        option = Candidate(strategy, -1, table, table.work(self.batch.tokens), self.lower(counts),
                           self.reduction(counts))
        self.plans[counts] = plan_candidate(option, self.batch, self.method, self.options, self.proposal.max_seq_len)
        self.value[counts] = self.plans[counts].predicted_ms + self.switch_ms(counts)
        return self.value[counts]

    def remembered(self) -> list[Remembered]:
        """The planned strategies with their ratios ``κ = plan / E``."""
        return [Remembered(self.strategy(n), self.plans[n].predicted_ms / self.estimate[n]) for n in self.plans]

    def switch_ms(self, counts: Counts) -> float:
        """``σ(n)``: ``n``'s communicators not yet known times ``t_comm``; memoised."""
        if counts not in self.switch:
            self.new[counts] = len(strategy_communicators(self.strategy(counts)) - self.known)
            self.switch[counts] = self.new[counts] * self.proposal.communicator_ms
        return self.switch[counts]

    def least(self, counts: Counts) -> float:
        """``L(n) + σ(n)`` (∞ when ``n`` is not a valid strategy)."""
        lower = self.lower(counts)
        return lower + self.switch_ms(counts) if np.isfinite(lower) else math.inf

    def lower(self, counts: Counts) -> float:
        """``L(n)``: spread work with fixed costs over ``n``'s devices, the longest piece's
        crossing, plus the reduction (∞ when ``n`` cannot hold a piece or be placed); memoised."""
        if counts not in self.bounds:
            self.bounds[counts] = self._lower(counts)
        return self.bounds[counts]

    def _lower(self, counts: Counts) -> float:
        n = np.asarray(counts)
        used = n > 0
        sizes = np.repeat(self.costs.size, n).tolist()
        if not used.any() or placement_problem(sizes, self.proposal.devices, self.proposal.devices_per_node):
            return math.inf
        spread = self.costs.spread[used].min(axis=0).sum() / float(n @ self.costs.size)
        crossing = np.where(self.costs.fits[used, 0], self.costs.crossing[used, 0], np.inf).min()
        return float(max(spread, crossing)) + self.reduction(counts)

    def could_beat(self, counts: Counts, value: float) -> bool:
        """Whether a plan on ``counts`` could take less than ``value``: with the reduction
        ``ρ`` and the switch ``σ`` taken, in compute time ``T = value − ρ − σ`` every piece
        needs a scheme of ``n`` that finishes it alone in ``T`` (``pp·(c + w) ≤ T``); the
        pieces' least device time must fit ``Σ_k n_k·D_k·(T − pp_k·c_k)``; and the pieces
        only one scheme ``k`` finishes in time must fit its ``n_k`` pipelines — their work
        within ``n_k·(T − pp_k·c_k)``, at most ``n_k`` of them above half of ``T − pp_k·c_k``
        (two of those cannot share a pipeline)."""
        n = np.asarray(counts)
        used = np.flatnonzero(n > 0)
        compute = value - self.reduction(counts) - self.switch_ms(counts)
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

    def reduction(self, counts: Counts) -> float:
        """``ρ(n)``: the least sharded scheme's reduction ``max_k r_k`` over the schemes ``n``
        uses (:func:`hydraulis.cost.exposed_reduce_ms` of the strategy), none for one pipeline
        when the optimizer layout is its own."""
        n = np.asarray(counts)
        if n.sum() == 1 and self.solo_free:
            return 0.0
        return float(self.costs.reduce[n > 0].max())

    def strategy(self, counts: Counts) -> Strategy:
        """The strategy of ``counts``, longest-holding groups first."""
        groups = [PipelineGroup(g.scheme, int(n), g.max_seq_len, g.time) for g, n in zip(self.menu, counts) if n > 0]
        return Strategy(tuple(sorted(groups, key=lambda g: (-g.max_seq_len, g.scheme))))

    def counts(self, strategy: Strategy, strict: bool = True) -> Counts | None:
        """The counts of ``strategy`` over the menu (None when a group is not on it and not
        ``strict``)."""
        counts = [0] * len(self.menu)
        for g in strategy.pipelines:
            k = self.index.get((g.scheme, g.max_seq_len, g.time))
            if k is None:
                if strict:
                    raise KeyError(g.scheme)
                return None
            counts[k] += g.count
        return tuple(counts)

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
        chosen = {int(k) for p in self.proposal.strategies for k in np.flatnonzero(self.counts(p.strategy))
                  if self.useful[k]}
        holders = useful[self.costs.fits[useful, 0]]
        if holders.size:
            chosen.add(int(holders[np.argmin(self.costs.crossing[holders, 0])]))
        for k in useful[np.argsort(excess[useful], kind="stable")]:
            if len(chosen) >= ACTIVE_SCHEMES:
                break
            chosen.add(int(k))
        return sorted(chosen)


@lru_cache(maxsize=1024)
def strategy_communicators(strategy: Strategy) -> frozenset[Communicator]:
    """:func:`hydraulis.base.placement.communicators` of ``strategy``'s pipelines."""
    return communicators([g.scheme for g in strategy.expanded()])

"""The planner on a mixed cluster: which pipelines, of which device groups, how many (design §7.4).

**What is optimised.** A strategy is a count vector ``n`` over the options
(:mod:`hydraulis.planner.mixed_options`: plain schemes per group, staged pipelines across
groups), feasible when every group's devices suffice,

    Σ_k n_k·u_k[g] ≤ N_g   for every group g,

The details: :func:`plan_mixed`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from hydraulis.base.cluster import ClusterSpaces
from hydraulis.base.errors import HydraulisError, require_int
from hydraulis.base.types import (
    OptimizerLayout,
    PipelineGroup,
    PipelineModel,
    Proposal,
    ProposedStrategy,
    SolverReport,
    Strategy,
)
from hydraulis.cost.staged import cluster_reduce_gbps
from hydraulis.planner.evaluate import CostContext, step_ms
from hydraulis.planner.mixed_options import MixedOption

IMPROVEMENT = 1e-3
"""``ε``: a move is taken only when it lowers ``J`` by more than this fraction."""


@dataclass(frozen=True)
class MixedSearchConfig:
    """The search's budgets: count vectors judged, options kept per usage."""

    target: int
    evaluations: int = 300
    per_usage: int = 3

    def __post_init__(self) -> None:
        require_int(self.target, "target", minimum=1)
        require_int(self.evaluations, "evaluations", minimum=1)
        require_int(self.per_usage, "per_usage", minimum=1)


@dataclass(frozen=True)
class MixedPlan:
    """The chosen strategy, its ``J`` over the sampled steps and how many strategies were judged."""

    strategy: Strategy
    counts: tuple[int, ...]
    options: tuple[MixedOption, ...]
    mean_ms: float
    evaluations: int


def cost_context(spaces: ClusterSpaces) -> CostContext:
    """ZeRO-1 over every device; the slowest of the groups' reduction bandwidths and the links;
    the largest hand-off latency; the least overlap of the groups' reductions and their widest
    gradients."""
    gbps = cluster_reduce_gbps(spaces)
    model = PipelineModel(spaces.spaces[0].pipeline_model.forward_fraction,
                          max(s.pipeline_model.p2p_ms for s in spaces.spaces))
    return CostContext(spaces.model.params, OptimizerLayout(spaces.cluster.devices, 1, 1), gbps, model,
                       min(s.reduce_overlap for s in spaces.spaces), max(s.grad_reduce_bytes for s in spaces.spaces))


def strategy_of(options: Sequence[MixedOption], counts: Sequence[int]) -> Strategy:
    """The strategy of ``counts`` pipelines of each option."""
    return Strategy(tuple(PipelineGroup(o.scheme, int(n), o.max_seq_len, o.time)
                          for o, n in zip(options, counts) if n > 0))


def plan_mixed(spaces: ClusterSpaces, options: Sequence[MixedOption], steps: Sequence[np.ndarray],
               config: MixedSearchConfig, starts: Sequence[Strategy] = ()) -> MixedPlan:
    """The search of :func:`plan_mixed` over ``options`` judged on ``steps``.

    and judged, like the one-type planner (:mod:`hydraulis.planner.search`), by ``J(n)``: the mean
    over sampled steps of the step time under the planner's two-stage dispatch and the exact 1F1B
    schedule (:func:`hydraulis.planner.evaluate.estimate_step`), each pipeline with its own
    bottleneck coefficients and capacity. A strategy that cannot hold some step's longest sequence
    has ``J = ∞``: long sequences go to the pipelines that can hold them, and a strategy must
    have some.

    Every option's parts tile its groups' nodes with power-of-two sizes, so any count vector within
    the budgets can be placed: each group by buddy placement, largest parts first.

    **Ranges.** Steps differ: about half of the long-tailed workload's 200K-token steps hold a 32K
    piece, the others need no pipeline that holds one. As in the one-type planner (design §7.1), the
    proposal keeps a strategy per serving range of the step's longest sequence — ``(0, S]`` and
    ``(0, S/2]`` by default (:func:`plan_mixed_ranges`) — and dispatch runs each step on the best
    strategy that holds it.

    **Search.** The options are first screened: per per-group usage, those on the front of
    capacity against the bottleneck time of a reference micro-batch (``S/8`` tokens), at most
    ``per_usage`` of them, and those the given starts use. Starts: from each option holding the target length alone, a greedy fill
    (add the option that lowers ``J`` most while one fits), and the ``starts`` given (e.g. the
    type-segregated answer, so the mixed plan is never judged slower than it), each followed by a
    descent. Descent: moves
    remove one pipeline of an option in use and add as many of another as the freed and idle
    devices take; the best move that lowers ``J`` by more than ``ε`` is taken, until none does or
    ``evaluations`` count vectors have been judged (memoised). The best end wins.

    Worked example (LLaMA-13B, 16 A100 + 16 H100, 200K tokens, 32K; ``paper_exp/mixed``): for
    ``(0, 32K]`` the type-segregated search ends at ``2×(2|2:20@a100>2:20@a100) + 1×(4|4:40@h100)``,
    the 32K sequences all on the one H100 pipeline; the mixed search at ``2×(4|2:13@a100>2:27@h100)``,
    two cross-type pipelines that each hold 32K, their H100 stages taking 27 of the 40 layers. For
    ``(0, 16K]`` both keep ``1×(2|4:20@a100>4:20@a100) + 1×(2|4:20@h100>4:20@h100)``.
    """
    started = {g.scheme for s in starts for g in s.pipelines}
    kept = screen(options, config)
    options = kept + tuple(o for o in options if o.scheme in started and o not in kept)
    search = _Search(spaces, options, steps, config.target)
    begins = [c for c in (_counts_of(options, s) for s in starts) if c is not None]
    ends = [search.descend(b, config.evaluations) for b in begins]
    for k, option in enumerate(options):
        if option.max_seq_len >= config.target and len(search.memo) < config.evaluations:
            begin = search.fill(tuple(int(i == k) for i in range(len(options))), config.evaluations)
            ends.append(search.descend(begin, config.evaluations))
    if not ends:
        raise HydraulisError("target", config.target, "is held by no pipeline of the cluster")
    counts = min(ends, key=search.judge)
    mean = search.judge(counts)
    if math.isinf(mean):
        raise HydraulisError("target", config.target, "no strategy holds every sampled step's longest sequence")
    return MixedPlan(strategy_of(options, counts), counts, tuple(options), mean, len(search.memo))


def plan_mixed_ranges(spaces: ClusterSpaces, options: Sequence[MixedOption], steps: Sequence[np.ndarray],
                      config: MixedSearchConfig, fractions: Sequence[float] = (1.0, 0.5),
                      starts: Sequence[Strategy] = (), min_steps: int = 4) -> tuple[MixedPlan, ...]:
    """One plan per serving range ``(0, S·f]``, largest first: each searched on the sampled steps
    whose longest sequence lies in its range (skipped with fewer than ``min_steps``) with target
    ``S·f``, starting also from the larger ranges' answers (which hold more, so a smaller range
    is never judged slower). Dispatch picks per step the best strategy that holds it."""
    plans: list[MixedPlan] = []
    for fraction in sorted(set(fractions), reverse=True):
        top = max(1, int(config.target * fraction))
        served = [s for s in steps if int(np.max(s)) <= top]
        if len(served) < min_steps and plans:
            continue
        plan = plan_mixed(spaces, options, served or steps, replace(config, target=top),
                          starts=(*starts, *(p.strategy for p in plans)))
        if all(plan.strategy != p.strategy for p in plans):
            plans.append(plan)
    return tuple(plans)


def mixed_proposal(spaces: ClusterSpaces, strategies: Sequence[Strategy], token_budget: int, max_seq_len: int,
                   explanation: str = "", predicted_ms: Sequence[float] = ()) -> Proposal:
    """A proposal over the whole cluster for dispatch: strategy ``i`` serves steps whose longest
    sequence it holds (``(0, min(its capacity, S)]``), predicted ``predicted_ms[i]`` (its ``J``;
    0 when not given); each pipeline group carries its own (staged) scheme, bottleneck
    coefficients and capacity — micro-batches fill it, so no headroom is reported; ZeRO-1 over
    every device."""
    context = cost_context(spaces)
    predicted = tuple(predicted_ms) or (0.0,) * len(strategies)
    proposed = tuple(ProposedStrategy(s, 0, min(s.max_seq_len, max_seq_len), ms, context.reduction_ms(s),
                                      (0,) * len(s.pipelines), explanation or str(s))
                     for s, ms in zip(strategies, predicted))
    return Proposal(spaces.model, spaces.cluster.devices, min(g.devices_per_node for g in spaces.cluster.groups),
                    context.layout, proposed, token_budget, max_seq_len, context.pipeline_model,
                    SolverReport("heuristic", "mixed-cluster search", 0.0), explanation, context.reduce_gbps,
                    reduce_overlap=context.reduce_overlap, grad_reduce_bytes=context.grad_reduce_bytes)


def screen(options: Sequence[MixedOption], config: MixedSearchConfig) -> tuple[MixedOption, ...]:
    """Per usage, the front of capacity against the reference micro-batch's time (:func:`plan_mixed`)."""
    reference = max(1, config.target // 8)
    by_usage: dict[tuple[int, ...], list[MixedOption]] = {}
    for option in options:
        by_usage.setdefault(option.usage, []).append(option)
    kept = []
    for group in by_usage.values():
        front: list[MixedOption] = []
        for option in sorted(group, key=lambda o: (-o.max_seq_len, _reference_ms(o, reference))):
            if not front or _reference_ms(option, reference) < _reference_ms(front[-1], reference):
                front.append(option)
        kept += _spread(front, config.per_usage)
    return tuple(kept)


class _Search:
    """``J`` memoised, the greedy fill and the descent over count vectors."""

    def __init__(self, spaces: ClusterSpaces, options: Sequence[MixedOption], steps: Sequence[np.ndarray],
                 target: int) -> None:
        self.options = tuple(options)
        self.target = target
        self.steps = list(steps)
        self.budget = np.array([g.devices for g in spaces.cluster.groups])
        self.usage = np.array([o.usage for o in options]).reshape(len(options), len(self.budget))
        self.context = cost_context(spaces)
        self.memo: dict[tuple[int, ...], float] = {}

    def judge(self, counts: tuple[int, ...]) -> float:
        if counts not in self.memo:
            self.memo[counts] = self._mean(counts)
        return self.memo[counts]

    def _mean(self, counts: tuple[int, ...]) -> float:
        if not any(counts) or np.any(np.asarray(counts) @ self.usage > self.budget):
            return math.inf
        strategy = strategy_of(self.options, counts)
        if strategy.max_seq_len < self.target:
            return math.inf
        try:
            return float(np.mean([step_ms(strategy, s, self.context) for s in self.steps]))
        except HydraulisError:
            return math.inf

    def idle(self, counts: tuple[int, ...]) -> np.ndarray:
        return self.budget - np.asarray(counts) @ self.usage

    def fill(self, counts: tuple[int, ...], evaluations: int) -> tuple[int, ...]:
        """Add the pipeline that lowers ``J`` most while one fits and lowers it."""
        while len(self.memo) < evaluations:
            idle = self.idle(counts)
            added = [tuple(n + (i == k) for i, n in enumerate(counts)) for k in range(len(self.options))
                     if np.all(self.usage[k] <= idle)]
            if not added:
                break
            best = min(added, key=self.judge)
            if self.judge(best) >= self.judge(counts) and not math.isinf(self.judge(counts)):
                break
            counts = best
        return counts

    def descend(self, counts: tuple[int, ...], evaluations: int) -> tuple[int, ...]:
        """Best improving move (remove one of an option in use, add as many of another as fit)
        until none improves by ``ε`` or the budget is spent."""
        while True:
            current = self.judge(counts)
            moves = self._moves(counts)
            fresh = [m for m in moves if m not in self.memo][:max(0, evaluations - len(self.memo))]
            scored = [m for m in moves if m in self.memo or m in fresh]
            if not scored:
                return counts
            best = min(scored, key=self.judge)
            if not self.judge(best) < current * (1.0 - IMPROVEMENT):
                return counts
            counts = best

    def _moves(self, counts: tuple[int, ...]) -> list[tuple[int, ...]]:
        moves: list[tuple[int, ...]] = []
        for a in [-1, *(k for k, n in enumerate(counts) if n > 0)]:
            removed = np.array(counts)
            if a >= 0:
                removed[a] -= 1
            idle = self.idle(tuple(removed))
            for b in range(len(self.options)):
                if b == a or not np.all(self.usage[b] <= idle):
                    continue
                fits = min(idle[g] // self.usage[b, g] for g in range(len(idle)) if self.usage[b, g] > 0)
                moved = removed.copy()
                moved[b] += fits
                candidate = tuple(int(x) for x in moved)
                if candidate not in moves:
                    moves.append(candidate)
        return moves


def _counts_of(options: Sequence[MixedOption], strategy: Strategy) -> tuple[int, ...] | None:
    schemes = [o.scheme for o in options]
    counts = [0] * len(options)
    for group in strategy.pipelines:
        if group.scheme not in schemes:
            return None
        counts[schemes.index(group.scheme)] += group.count
    return tuple(counts)


def _reference_ms(option: MixedOption, tokens: int) -> float:
    return option.time.sequence_ms(tokens)


def _spread(front: list[MixedOption], count: int) -> list[MixedOption]:
    """At most ``count`` of ``front``: its ends and evenly spaced ones between."""
    if len(front) <= count:
        return front
    picks = sorted({round(i * (len(front) - 1) / (count - 1)) for i in range(count)}) if count > 1 else [0]
    return [front[i] for i in picks]

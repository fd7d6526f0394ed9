"""Propose a few heterogeneous strategies for a length distribution (design §7).

The details: :func:`propose`."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from hydraulis.base.types import PipelineGroup, Proposal, ProposedStrategy, SchemeSpace, SolverReport, Strategy
from hydraulis.base.workload import cut_to_max, sample_batches
from hydraulis.cost import lower_bound_ms
from hydraulis.planner.config import PlannerConfig
from hydraulis.planner.differing import complete_proposal, gains
from hydraulis.planner.distribution import StepStatistics, length_histogram, step_statistics
from hydraulis.planner.evaluate import CostContext, StepEstimate, estimate_step, step_ms
from hydraulis.planner.fluid import fluid_problem
from hydraulis.planner.layout import choose_optimizer_layout
from hydraulis.planner.options import SchemeOption, planning_space, scheme_options
from hydraulis.planner.program import BisectionStatus, CountsAnswer, optimise_counts
from hydraulis.planner.search import CountsSearch, Descent
from hydraulis.planner.specialise import homogeneous_step_ms, serving_ranges, spread_step_ms
from hydraulis.planner.validate import node_placement
from hydraulis.planner.variants import choose_variants, explain_variants, plain_space, variant_targets, variants_note

BASELINE = "homogeneous baseline"
LOCAL_SEARCH = "local search"
COMPLEMENT = "complement for differing steps"
SCREENED_HOMOGENEOUS = 3
SEARCH_STARTS = 3
"""Local searches per range, from the best starts on the search steps."""
ACTIVE_BY_THROUGHPUT = 4
"""Options the local search may move devices to besides those of its starts."""


def propose(space: SchemeSpace, lengths: Sequence[int] | np.ndarray, config: PlannerConfig) -> Proposal:
    """A proposal for documents of ``lengths`` tokens.

    Recipe:

    1. plan on the requested cluster; choose the optimizer layout (planner/layout.py);
    2. sample steps filled to the token budget and take their statistics (planner/distribution.py);
       in a space with variants, add each scheme's fastest variant for each longest sequence the
       ranges may need (planner/variants.py); the usable schemes (planner/options.py);
    3. find the best homogeneous strategy that holds ``S`` — the baseline every range may fall back to;
    4. split the longest-sequence range ``(0, S]`` into at most ``K`` serving ranges
       (planner/specialise.py);
    5. per range: integer programs from the homogeneous incumbent (planner/program.py); a local
       search (planner/search.py) from the best of their answers, the incumbent and the baseline;
       every start and every end of the search is judged on the range's sampled steps
       (planner/evaluate.py) and the best is kept;
    6. prune: a strategy that a neighbour replaces on its steps at a loss of at most ``min_gain``
       (duplicates lose nothing) is dropped and the neighbour serves both ranges — provided the
       neighbour stays no slower than the baseline there;
    7. complete the proposal for steps that differ (planner/differing.py): while fewer than ``K``,
       add the strategy that lowers the mean over the sampled steps of their best strategy's time
       by more than ``min_gain``; it serves the steps it is best on;
    8. predicted step time, reduction, memory headroom and gain per strategy, from the sampled steps.

    **Two searches, one judge.** Let ``J(n)`` be the judge's mean step time of counts ``n`` over a
    range's sampled steps ``I`` — what the proposal predicts and is compared by. The integer
    programs solve ``min_{n∈F} M(n)`` for the fluid makespan ``M`` of the range's expected step
    (planner/fluid.py) to a proven gap: fast at any ``N`` (a dozen programs), with a lower bound,
    and on small clusters their answer is usually also the best under ``J``. But ``M`` sees the
    mean number of long sequences, not its spread over steps, so at scale ``argmin M`` can lose to
    simple two-group strategies under ``J``. The local search descends on ``J`` itself from the
    programs' answers and the homogeneous strategies (its first, large moves make two-group
    strategies of them), judging ``J`` on the first ``search_steps`` steps of ``I`` for speed; a
    descent never ends above its start. The range keeps

        n* = argmin_{n ∈ C} J(n),   C = {answers of the programs} ∪ {incumbent, baseline} ∪ {ends of the descents}

    judged on all of ``I``, so ``J(n*) ≤ min(J(n_programs), J(n_baseline))``: the search can only
    improve on the programs' answer, and the steps of ``I`` the search did not judge check a
    descent fitted to its subset. (LLaMA-32B analytic, 1,024 H100s, 1.6M tokens: the programs'
    50×(1,8,1) + 9×(2,8,1) + 1×(4,8,1) + 7×(8,8,1) has ``J`` = 1829 ms; the descent from it ends
    at 40×(1,8,1) + 8×(2,8,1) + 9×(8,8,1), 1752 ms.)

    Each range keeps the best of candidates that include the baseline, and a merged range keeps
    a strategy no slower than the baseline on it, all judged on the same steps: the proposal's
    mean predicted step time is never above the best homogeneous strategy's that step 3 found.

    **Budgets, not clocks.** Every search is bounded by work (planner/config.py: the programs by
    the tolerance and ``solver_nodes``, the local search by ``search_evaluations``); only the safety
    stop ``time_limit_s`` reads the clock, and the proposal's solver status says when it fired. So
    the same inputs and seed give the same proposal on an idle machine and on a loaded one.
    """
    started, deadline = time.perf_counter(), time.monotonic() + config.time_limit_s
    space = plain_space(planning_space(space, config.devices, config.devices_per_node), config.variants)
    layout, layout_note = choose_optimizer_layout(space, config.max_seq_len, config.optimizer_layout,
                                                  config.loss_chunk_tokens)
    steps = sample_batches(lengths, config.token_budget, config.steps, config.max_seq_len, config.seed)
    stats = step_statistics(steps, config.bucket_width, config.max_seq_len)
    space, variants = choose_variants(space, layout, variant_targets(stats, config.strategies))
    options, left_out = scheme_options(space, layout, config.node_size, config.loss_chunk_tokens)
    judge = Judge(steps, CostContext(space.model.params, layout, space.reduce_gbps, space.pipeline_model,
                                     space.reduce_overlap, space.grad_reduce_bytes))
    baseline = best_homogeneous(options, stats, judge, space, config)
    ranges = serving_ranges(stats, options, config.devices, space.pipeline_model, config.strategies,
                            config.min_gain)
    designs = [design_range(lo, hi, stats, options, judge, baseline, space, config, deadline) for lo, hi in ranges]
    kept = prune(designs, judge, config.min_gain, baseline)
    kept += complement(kept, designs, stats, options, judge, config, deadline)
    strategies = explain_variants(_with_gains(tuple(_proposed(d, options, judge, config) for d in kept), judge, stats),
                                  variants)
    notes = _notes(lengths, stats, kept, judge, baseline, config) + [variants_note(space, config.variants, variants)]
    return Proposal(
        model=space.model, devices=config.devices, devices_per_node=config.devices_per_node,
        optimizer_layout=layout, strategies=strategies, token_budget=config.token_budget,
        max_seq_len=config.max_seq_len, pipeline_model=space.pipeline_model,
        solver=_report(designs, kept, started),
        explanation=" ".join([layout_note + ".", *notes, *(n + "." for n in left_out)]),
        reduce_gbps=space.reduce_gbps, communicator_ms=space.communicator_ms, reduce_overlap=space.reduce_overlap,
        grad_reduce_bytes=space.grad_reduce_bytes, loss_chunk_tokens=config.loss_chunk_tokens,
    )


class Judge:
    """Predicted times of strategies on the sampled steps, each (strategy, step) computed once
    (:func:`hydraulis.planner.evaluate.step_ms`); the full estimates, with the largest
    micro-batches, only for the strategies proposed."""

    def __init__(self, steps: list[np.ndarray], context: CostContext) -> None:
        self.steps, self.context = steps, context
        self._cache: dict[tuple[Strategy, int], float] = {}

    def times(self, strategy: Strategy, indices: Sequence[int]) -> list[float]:
        for i in indices:
            if (strategy, i) not in self._cache:
                self._cache[strategy, i] = step_ms(strategy, self.steps[i], self.context)
        return [self._cache[strategy, i] for i in indices]

    def mean_ms(self, strategy: Strategy, indices: Sequence[int]) -> float:
        return float(np.mean(self.times(strategy, indices)))

    def estimates(self, strategy: Strategy, indices: Sequence[int]) -> list[StepEstimate]:
        return [estimate_step(strategy, self.steps[i], self.context) for i in indices]


@dataclass(frozen=True, eq=False)
class RangeDesign:
    """The strategy serving steps whose longest sequence lies in ``(lo, hi]`` (sampled ``steps``),
    what produced it, the integer programs' answer for the range, notes on how it was chosen,
    and what the search is worth: the programs' status, or ``time_limit`` when the safety stop
    also cut a local search short."""

    lo: int
    hi: int
    steps: np.ndarray
    strategy: Strategy
    source: str
    answer: CountsAnswer
    notes: tuple[str, ...]
    status: BisectionStatus


def best_homogeneous(options: Sequence[SchemeOption], stats: StepStatistics, judge: Judge, space: SchemeSpace,
                     config: PlannerConfig) -> Strategy:
    """The homogeneous strategy holding ``S`` with the lowest mean predicted step time, among
    the few that the fluid proxy (planner/specialise.py) ranks first."""
    proxy = homogeneous_step_ms(stats, options, config.devices, space.pipeline_model).sum(axis=1)
    proxy[[o.capacity < config.max_seq_len for o in options]] = np.inf
    ranked = [k for k in np.argsort(proxy, kind="stable")[:SCREENED_HOMOGENEOUS] if np.isfinite(proxy[k])]
    everything = range(len(stats.maxima))
    candidates = [strategy_of(options, _single(len(options), k, config.devices // options[k].devices))
                  for k in ranked]
    return min(candidates, key=lambda s: judge.mean_ms(s, everything))


def design_range(lo: int, hi: int, stats: StepStatistics, options: Sequence[SchemeOption], judge: Judge,
                 baseline: Strategy, space: SchemeSpace, config: PlannerConfig,
                 deadline: float = math.inf) -> RangeDesign:
    """Step 5 of the recipe for the range ``(lo, hi]`` within the config's budgets; ``deadline``
    (``time.monotonic``) is the safety stop."""
    indices = stats.serving(lo, hi)
    problem = fluid_problem(options, stats.workload(indices), hi, config.devices, space.pipeline_model,
                            config.work_classes)
    answer = optimise_counts(problem, config.solver, config.tolerance, config.solver_nodes, deadline)
    starts = dict(answer.found)
    starts.setdefault(counts_of(options, baseline), BASELINE)
    descents = search_counts(list(starts), indices, hi, stats, options, judge, space, config, deadline)
    placeable = {strategy_of(options, counts): source for counts, source in starts.items()
                 if not node_placement(strategy_of(options, counts), config.devices, config.devices_per_node)}
    for descent in descents:
        placeable.setdefault(strategy_of(options, descent.counts), LOCAL_SEARCH)
    strategy = min(placeable, key=lambda s: judge.mean_ms(s, indices))
    source = placeable[strategy]
    judged = ", ".join(f"{s} {judge.mean_ms(s, indices):.0f} ms ({origin})" for s, origin in placeable.items())
    searched = "; ".join(f"{strategy_of(options, d.start)} {d.start_ms:.0f} → {strategy_of(options, d.counts)} "
                         f"{d.mean_ms:.0f} ms" + (", stopped by the safety time limit" if d.stopped else "")
                         for d in descents)
    note = (f"For ({lo}, {hi}] ({len(indices)} steps) {answer.solves} integer programs reached a fluid makespan of "
            f"{answer.makespan_ms:.0f} ms (proven ≥ {answer.lower_bound_ms:.0f} ms, {answer.status.value}); the local "
            f"search judged {sum(d.evaluations for d in descents)} of its budget of {config.search_evaluations} "
            f"strategies on {min(len(indices), config.search_steps)} of its steps ({searched}); judged on all its "
            f"steps: {judged}; kept the {source} strategy.")
    stopped = any(d.stopped for d in descents)
    return RangeDesign(lo, hi, indices, strategy, source, answer, (note,),
                       BisectionStatus.TIME_LIMIT if stopped else answer.status)


def search_counts(starts: list[tuple[int, ...]], indices: np.ndarray, longest: int, stats: StepStatistics,
                  options: Sequence[SchemeOption], judge: Judge, space: SchemeSpace,
                  config: PlannerConfig, deadline: float = math.inf) -> list[Descent]:
    """Local search (planner/search.py) from the best :data:`SEARCH_STARTS` of ``starts``, judged on
    the first ``search_steps`` of the range's steps; active options: those of the starts and the
    :data:`ACTIVE_BY_THROUGHPUT` best by spread work (planner/specialise.py)."""
    probe = indices[:config.search_steps]
    holds = np.array([o.capacity >= longest for o in options])

    def score(counts: tuple[int, ...]) -> float:
        strategy = strategy_of(options, counts)
        if not holds[np.asarray(counts) > 0].any() or node_placement(strategy, config.devices,
                                                                     config.devices_per_node):
            return float("inf")
        return judge.mean_ms(strategy, probe)

    spread = spread_step_ms(stats, options, config.devices, space.pipeline_model)[:, indices].mean(axis=1)
    active = {int(k) for counts in starts for k in np.flatnonzero(counts)}
    active |= {int(k) for k in np.argsort(spread, kind="stable")[:ACTIVE_BY_THROUGHPUT]}
    search = CountsSearch([o.devices for o in options], config.devices, sorted(active), score,
                          config.search_evaluations, deadline)
    ordered = sorted(starts, key=lambda counts: (search.judge(counts), counts))[:SEARCH_STARTS]
    return [search.descend(counts) for counts in ordered if np.isfinite(search.judge(counts))]


def prune(designs: list[RangeDesign], judge: Judge, min_gain: float, baseline: Strategy) -> list[RangeDesign]:
    """Step 6 of the recipe: merge neighbours while one of them gains at most ``min_gain`` over
    the other and the kept strategy is no slower than ``baseline`` on the merged steps."""
    designs = list(designs)
    while len(designs) > 1:
        merges = []
        for j, (left, right) in enumerate(zip(designs, designs[1:])):
            both = np.concatenate((left.steps, right.steps))
            pairs = [(left, right)] + ([(right, left)] if left.strategy.max_seq_len >= right.hi else [])
            for dropped, keeper in pairs:
                gain = _gain(dropped, keeper.strategy, judge)
                if gain <= min_gain and judge.mean_ms(keeper.strategy, both) <= judge.mean_ms(baseline, both):
                    merges.append((gain, j, keeper, dropped))
        if not merges:
            break
        gain, j, keeper, dropped = min(merges, key=lambda m: m[:2])
        left, right = designs[j], designs[j + 1]
        note = (f"It also serves ({dropped.lo}, {dropped.hi}], where that range's own strategy {dropped.strategy} "
                f"gained only {gain:.1%}.")
        designs[j:j + 2] = [RangeDesign(left.lo, right.hi, np.concatenate((left.steps, right.steps)),
                                        keeper.strategy, keeper.source, keeper.answer,
                                        keeper.notes + dropped.notes + (note,), keeper.status)]
    return designs


def strategy_of(options: Sequence[SchemeOption], counts: Sequence[int]) -> Strategy:
    """The strategy with ``counts[k]`` pipelines of option ``k``, longest-holding groups first."""
    groups = [PipelineGroup(o.scheme, int(n), o.capacity, o.time) for o, n in zip(options, counts) if n > 0]
    return Strategy(tuple(sorted(groups, key=lambda g: (-g.max_seq_len, g.scheme))))


def counts_of(options: Sequence[SchemeOption], strategy: Strategy) -> tuple[int, ...]:
    """Pipelines per option of ``strategy`` (the inverse of :func:`strategy_of`)."""
    per_scheme = {g.scheme: g.count for g in strategy.pipelines}
    return tuple(per_scheme.get(o.scheme, 0) for o in options)


def _gain(design: RangeDesign, replacement: Strategy, judge: Judge) -> float:
    """Relative step time ``design`` saves over ``replacement`` on its own steps."""
    return 1.0 - judge.mean_ms(design.strategy, design.steps) / judge.mean_ms(replacement, design.steps)


def _single(size: int, k: int, count: int) -> list[int]:
    counts = [0] * size
    counts[k] = count
    return counts


def _proposed(design: RangeDesign, options: Sequence[SchemeOption], judge: Judge,
              config: PlannerConfig) -> ProposedStrategy:
    estimates = judge.estimates(design.strategy, design.steps)
    predicted = float(np.mean([e.step_ms for e in estimates]))
    peaks = np.max([e.peak_tokens for e in estimates], axis=0)
    memory = {o.scheme: o.memory for o in options}
    headroom = tuple(int(memory[g.scheme].headroom_bytes(int(p))) for g, p in zip(design.strategy.pipelines, peaks))
    triples = [(o.scheme, o.time, o.capacity) for o in options]
    bound = float(np.mean([lower_bound_ms(judge.steps[i], triples, config.devices) for i in design.steps]))
    explanation = " ".join((f"Serves {len(design.steps)} of {config.steps} sampled steps (longest sequence in "
                            f"({design.lo}, {design.hi}]): predicted {predicted:.0f} ms = {predicted / bound:.2f}× "
                            f"the lower bound {bound:.0f} ms.", *design.notes))
    return ProposedStrategy(design.strategy, design.lo, design.hi, predicted,
                            judge.context.reduction_ms(design.strategy), headroom, explanation)


def complement(kept: list[RangeDesign], designs: list[RangeDesign], stats: StepStatistics,
               options: Sequence[SchemeOption], judge: Judge, config: PlannerConfig,
               deadline: float = math.inf) -> list[RangeDesign]:
    """Step 7 of the recipe (planner/differing.py): strategies for steps that differ, each
    serving the steps it is best on."""
    judged = _judged(judge, stats)
    added = complete_proposal([d.strategy for d in kept], stats, options, judged, config.devices,
                              config.devices_per_node, config.strategies, config.min_gain, config.search_steps,
                              config.search_evaluations, lambda counts: strategy_of(options, counts),
                              lambda strategy: counts_of(options, strategy), deadline)
    found = []
    for strategy, steps, gain in added:
        maxima = stats.maxima[steps]
        lo, hi = max(0, int(maxima.min()) - 1), int(maxima.max())
        home = next(d for d in designs if d.lo < hi <= d.hi)
        note = (f"Added for steps that differ: best on {len(steps)} sampled steps, it lowers the proposal's mean "
                f"predicted step time by {gain:.1%} (planner/differing.py).")
        found.append(RangeDesign(lo, hi, steps, strategy, COMPLEMENT, home.answer, (note,), home.status))
    return found


def _judged(judge: Judge, stats: StepStatistics):
    """Step times of a strategy on sampled steps, ∞ on those it cannot hold."""
    def judged(strategy: Strategy, indices: Sequence[int]) -> list[float]:
        return [judge.times(strategy, [i])[0] if strategy.max_seq_len >= stats.maxima[i] else math.inf
                for i in indices]
    return judged


def _with_gains(strategies: tuple[ProposedStrategy, ...], judge: Judge,
                stats: StepStatistics) -> tuple[ProposedStrategy, ...]:
    """Each strategy's explanation with what it gains (planner/differing.py)."""
    found = gains([p.strategy for p in strategies], _judged(judge, stats), len(stats.maxima))
    explained = []
    for proposed, (steps, extra, runner_up) in zip(strategies, found):
        if runner_up < 0:
            note = f"Best on {len(steps)} of the {len(stats.maxima)} sampled steps."
        else:
            note = (f"Best on {len(steps)} of the {len(stats.maxima)} sampled steps, where the next best, mostly "
                    f"strategy {runner_up}, would take {extra:.1%} longer.")
        explained.append(replace(proposed, explanation=f"{proposed.explanation} {note}"))
    return tuple(explained)


def _notes(lengths: Sequence[int] | np.ndarray, stats: StepStatistics, kept: list[RangeDesign], judge: Judge,
           baseline: Strategy, config: PlannerConfig) -> list[str]:
    histogram = length_histogram(cut_to_max(lengths, config.max_seq_len), config.bucket_width, config.max_seq_len)
    everything = range(len(stats.maxima))
    judged = _judged(judge, stats)
    proposal_ms = float(np.min([judged(d.strategy, everything) for d in kept], axis=0).mean())
    baseline_ms = judge.mean_ms(baseline, everything)
    return [
        f"Documents cut to {config.max_seq_len} tokens: median ≤ {histogram.quantile(0.5)}, "
        f"p99 ≤ {histogram.quantile(0.99)}; sampled steps' longest sequence: median "
        f"{int(np.median(stats.maxima))}, max {int(stats.maxima.max())}.",
        f"Over the {config.steps} sampled steps, each on its best strategy, the proposal's mean predicted step time "
        f"is {proposal_ms:.0f} ms "
        f"against {baseline_ms:.0f} ms for the best homogeneous strategy {baseline} "
        f"(ratio {proposal_ms / baseline_ms:.3f}).",
    ]


def _report(designs: list[RangeDesign], kept: list[RangeDesign], started: float) -> SolverReport:
    """The proposal's solver status: ``time_limit`` when the safety stop cut any range's search
    short, else ``node_limit`` when a program's node budget left a range's bound unproven, else
    ``optimal`` (every range's fluid makespan within the tolerance of its proven bound)."""
    statuses = {d.status for d in designs}
    status = next(s for s in (BisectionStatus.TIME_LIMIT, BisectionStatus.NODE_LIMIT, BisectionStatus.OPTIMAL)
                  if s in statuses)
    sources = sorted({d.source for d in kept})
    message = "; ".join(f"({d.lo}, {d.hi}]: {d.answer.solves} programs, fluid {d.answer.makespan_ms:.0f} ms "
                        f"≥ {d.answer.lower_bound_ms:.0f} ms ({d.status.value}), chose {d.source}" for d in designs)
    return SolverReport(status.value, "+".join(sources), (time.perf_counter() - started) * 1000.0, message)

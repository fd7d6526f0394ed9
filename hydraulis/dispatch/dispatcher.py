"""Dispatch one global batch: choose a strategy of the proposal, give its pipelines their
sequences, pack them into micro-batches (design §8).

The details: :func:`dispatch`."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hydraulis.base.step_plan import pipeline_classes
from hydraulis.base.types import (
    BatchingMethod,
    MicroBatches,
    PipelineModel,
    PipelinePlans,
    Proposal,
    StepPlan,
    Strategy,
    Synthesis,
)
from hydraulis.dispatch.assign import assign_pieces
from hydraulis.dispatch.balanced_packing import balanced_packings
from hydraulis.dispatch.baselines import fixed_capacity_packings, packed_round_robin, padded_round_robin
from hydraulis.dispatch.batch import Batch, prepare_batch
from hydraulis.dispatch.bounds import strategy_bound
from hydraulis.dispatch.ilp import improve_slowest
from hydraulis.dispatch.options import DispatchOptions
from hydraulis.dispatch.packing import Packing
from hydraulis.dispatch.pipelines import PipelineTable
from hydraulis.dispatch.validation import batching_method, check_proposal


def dispatch(
    proposal: Proposal,
    lengths: Sequence[int] | np.ndarray,
    method: BatchingMethod | str = BatchingMethod.DISPATCH_BALANCED_PACKING,
    options: DispatchOptions = DispatchOptions(),
) -> StepPlan:
    """The step plan of the batch ``lengths`` (one length per sequence, in tokens) under
    ``proposal`` with ``method``; :class:`~hydraulis.base.errors.HydraulisError` on bad input.

    Recipe of :func:`dispatch`:

    1. check the method, the proposal and the lengths; align, and truncate or split sequences no
       pipeline can hold if asked to (:mod:`.batch`);
    2. bound every strategy from below (``B_k``, :func:`~hydraulis.dispatch.bounds.strategy_bound`
       plus its reduction); a strategy that cannot hold the longest piece is skipped;
    3. plan strategies in increasing ``B_k`` with the batching method — for Hydraulis stage 1
       (:mod:`.assign`) then stage 2 (:mod:`.balanced_packing`) — and stop as soon as ``B_k``
       reaches the best predicted step time so far (that strategy and all after it cannot win);
    4. keep the strategy with the lowest predicted step time ``max_p T_p + T_reduce``;
    5. for Hydraulis, let an integer program try to speed up its slowest pipeline (:mod:`.ilp`)
       when given a node budget (``ilp_nodes``);
    6. write the step plan, with the lower bound ``min_k B_k`` of the batch under the proposal.

    **The plan's lower bound.** Every plan of the batch runs one strategy ``k`` of the proposal,
    so its step time is at least ``B_k = max(balance_k, crossing_k) + T_reduce(k)``
    (:mod:`.bounds`), and ``LB = min_k B_k`` bounds every plan dispatch could make. It is never
    below design §6's work bound ``Σ_i min_k D_k·w_k(s_i)/N``
    (:func:`~hydraulis.dispatch.bounds.work_lower_bound_ms`): ``balance_k`` is at least strategy
    ``k``'s perfectly spread work, which uses only its own schemes and devices (``≤ N``). The two
    differ where no plan can reach the work bound: the reduction, a strategy's less efficient
    pipelines, and a long sequence that one pipeline must carry through all its stages (7B,
    64 devices, 200K tokens: a 32K sequence takes ≥ 1.35 s on the fastest (1,16,1) pipeline while
    the work bound is ≈ 0.7 s).

    **Determinism.** Nothing here is random but the order of equal-length sequences, which the
    seed fixes, and nothing is bounded by time but the integer programs' safety stop: their work
    is bounded by ``ilp_nodes`` nodes each (hydraulis/base/solver.py), so the same inputs, seed and
    budget give the same plan on any machine. Should the safety stop fire, the pipeline's status
    (``ilp_time_limit``) and the notes say so.
    """
    started = time.perf_counter()
    method, batch = prepare_dispatch(proposal, lengths, method, options)
    best, lower_bound, notes = plan_proposal(proposal, batch, method, options)
    return step_plan(batch, method, options, best, lower_bound, notes, started)


def prepare_dispatch(proposal: Proposal, lengths: Sequence[int] | np.ndarray, method: BatchingMethod | str,
                     options: DispatchOptions) -> tuple[BatchingMethod, Batch]:
    """Step 1 of the recipe: the checked method and the batch's pieces."""
    method = batching_method(method)
    check_proposal(proposal)
    return method, prepare_batch(lengths, max(s.strategy.max_seq_len for s in proposal.strategies), options)


def plan_proposal(proposal: Proposal, batch: Batch, method: BatchingMethod,
                  options: DispatchOptions) -> tuple[StrategyPlan, float, list[str]]:
    """Steps 2–5 of the recipe: the best plan over the proposal's strategies, the plan's lower
    bound ``min_k B_k`` and the notes."""
    notes = list(batch.notes)
    candidates = [candidate(proposed.strategy, index, proposed.reduce_ms, batch, proposal.pipeline_model)
                  for index, proposed in enumerate(proposal.strategies)]
    best: StrategyPlan | None = None
    for option in sorted(candidates, key=lambda c: (c.bound, c.index)):
        if not np.isfinite(option.bound):
            notes.append(f"strategy {option.index} skipped: cannot hold a piece of {int(batch.tokens[0])} tokens")
        elif best is None or option.bound < best.predicted_ms:
            plan = plan_candidate(option, batch, method, options, proposal.max_seq_len)
            if best is None or plan.predicted_ms < best.predicted_ms:
                best = plan
    if method is BatchingMethod.DISPATCH_BALANCED_PACKING:
        best = _with_ilp(best, batch, options, notes)
    return best, min(c.bound for c in candidates), notes


@dataclass(frozen=True)
class Candidate:
    """A strategy to plan the batch on: its index in the proposal (−1: synthesised), its
    pipelines as arrays, every piece's work per group, its lower bound ``B`` (∞ when it cannot
    hold the longest piece) and its reduction."""

    strategy: Strategy
    index: int
    table: PipelineTable
    work: np.ndarray
    bound: float
    reduce_ms: float


@dataclass(frozen=True)
class StrategyPlan:
    """A candidate's packing of the batch: every pipeline's micro-batches and time."""

    candidate: Candidate
    packings: list[Packing]

    @property
    def predicted_ms(self) -> float:
        return max(p.time_ms for p in self.packings) + self.candidate.reduce_ms


def candidate(strategy: Strategy, index: int, reduce_ms: float, batch: Batch, model: PipelineModel) -> Candidate:
    """``strategy`` as a :class:`Candidate` for ``batch`` (its bound :func:`strategy_bound` plus the reduction)."""
    table = PipelineTable.of(strategy, model)
    work = table.work(batch.tokens)
    return Candidate(strategy, index, table, work, strategy_bound(table, batch.tokens, work) + reduce_ms, reduce_ms)


def plan_candidate(candidate: Candidate, batch: Batch, method: BatchingMethod, options: DispatchOptions,
                   context: int) -> StrategyPlan:
    """The batching method's packing of ``batch`` on ``candidate`` (which must hold every piece);
    ``context`` is the padding and fixed-packing baselines' context length."""
    table, work = candidate.table, candidate.work
    if method is BatchingMethod.PADDING:
        return StrategyPlan(candidate, padded_round_robin(table, batch, context))
    if method is BatchingMethod.FIXED_PACKING:
        return StrategyPlan(candidate, packed_round_robin(table, batch, work, context))
    owner = assign_pieces(table, batch.tokens, work, options.bubble_factor, options.local_moves)
    pieces_of = _pieces_of(owner, table.pipelines)
    if method is BatchingMethod.DISPATCH_FIXED_PACKING:
        return StrategyPlan(candidate, fixed_capacity_packings(table, pieces_of, batch, work, context))
    return StrategyPlan(candidate, balanced_packings(table, pieces_of, batch.tokens, work, options.bubble_factor,
                                                     candidate.bound - candidate.reduce_ms))


def _pieces_of(owner: np.ndarray, pipelines: int) -> list[np.ndarray]:
    """Piece positions of every pipeline, ascending (= longest first)."""
    order = np.argsort(owner, kind="stable")
    bounds = np.searchsorted(owner[order], np.arange(pipelines + 1))
    return [order[bounds[p]:bounds[p + 1]] for p in range(pipelines)]


def _with_ilp(best: StrategyPlan, batch: Batch, options: DispatchOptions, notes: list[str]) -> StrategyPlan:
    if options.ilp_nodes == 0:
        notes.append("ilp skipped: ilp_nodes 0 (greedy packings)")
        return best
    packings, ilp_notes = improve_slowest(best.candidate.table, best.packings, batch.tokens, best.candidate.work, options)
    notes.extend(ilp_notes)
    return StrategyPlan(best.candidate, packings)


def step_plan(batch: Batch, method: BatchingMethod, options: DispatchOptions, best: StrategyPlan, lower_bound: float,
              notes: list[str], started: float, synthesis: Synthesis | None = None) -> StepPlan:
    """Step 6 of the recipe: the plan of ``best`` (with ``synthesis`` when it was made for this
    step, whose switch cost it then includes), its pipelines stored once per class and its
    micro-batches as flat arrays (:class:`~hydraulis.base.step_plan.PipelinePlans`)."""
    packings = best.packings
    pipelines = PipelinePlans(
        classes=pipeline_classes((g.scheme, g.max_seq_len, g.count) for g in best.candidate.strategy.pipelines),
        micro_batches=_micro_batches(batch, packings),
        pipeline_bounds=np.cumsum([0, *(len(p.micro_batches) for p in packings)]),
        predicted_ms=np.array([p.time_ms for p in packings], dtype=np.float64),
        solver_status=tuple(p.status.value for p in packings),
        proven_ms=np.array([p.time_ms if p.status.proven else math.nan if p.proven_ms is None else p.proven_ms
                            for p in packings], dtype=np.float64),
    )
    return StepPlan(
        strategy_index=best.candidate.index,
        method=method,
        predicted_ms=best.predicted_ms + (synthesis.switch_ms if synthesis else 0.0),
        lower_bound_ms=lower_bound,
        planning_ms=(time.perf_counter() - started) * 1e3,
        pipelines=pipelines,
        alignment=options.alignment,
        seed=options.seed,
        notes=tuple(notes),
        synthesis=synthesis,
    )


def _micro_batches(batch: Batch, packings: Sequence[Packing]) -> MicroBatches:
    """Every pipeline's micro-batches, one after the other, gathered from ``batch`` in one pass."""
    arrays = [mb for packing in packings for mb in packing.micro_batches]
    positions = np.concatenate(arrays) if arrays else np.empty(0, dtype=np.int64)
    bounds = np.zeros(len(arrays) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, arrays), dtype=np.int64, count=len(arrays)), out=bounds[1:])
    return MicroBatches(batch.sequence[positions], batch.length[positions], bounds)

"""Simulate training on a mixed cluster: four systems on the same cost model and steps (design §6.7).

The details: :func:`simulate_mixed`."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np

from hydraulis.base.cluster import ClusterSpaces
from hydraulis.base.errors import require_int
from hydraulis.base.scheme_profile import sequence_work_ms
from hydraulis.base.types import BatchingMethod, Proposal
from hydraulis.base.workload import sample_batches
from hydraulis.cost.mixed_bound import layer_work_coefficients, mixed_bound
from hydraulis.cost.staged import staged_cost
from hydraulis.dispatch import dispatch
from hydraulis.planner.mixed import mixed_proposal
from hydraulis.planner.mixed_options import mixed_options
from hydraulis.planner.mixed_propose import MixedPlannerConfig, plan_cluster, replicas


class MixedContender(str, Enum):
    """A system of the comparison (:func:`simulate_mixed`)."""

    PLANNER = "mixed_planner"
    SEGREGATED = "type_segregated"
    FLASHFLEX = "flashflex"
    HOMOGENEOUS_FASTEST = "homogeneous_fastest"

    @property
    def method(self) -> BatchingMethod:
        return BatchingMethod.FIXED_PACKING if self is MixedContender.FLASHFLEX else \
            BatchingMethod.DISPATCH_BALANCED_PACKING


@dataclass(frozen=True)
class MixedSimulationConfig:
    """The planners' configuration (they sample ``planner.steps`` steps with ``planner.seed``)
    and the held-out steps simulated (seed ``planner.seed + 1``)."""

    planner: MixedPlannerConfig
    steps: int = 100

    def __post_init__(self) -> None:
        require_int(self.steps, "steps", minimum=1)


@dataclass(frozen=True)
class ContenderResult:
    """One contender: its strategy, the dispatcher's predicted step per held-out step (every stage
    at the pipeline's bottleneck) and the same plans timed by the exact staged 1F1B schedule
    (each stage at its own time), and their means."""

    contender: MixedContender
    strategy: str
    step_ms: tuple[float, ...]
    exact_ms: tuple[float, ...]

    @property
    def mean_ms(self) -> float:
        return float(np.mean(self.step_ms))

    @property
    def exact_mean_ms(self) -> float:
        return float(np.mean(self.exact_ms))


@dataclass(frozen=True)
class MixedSimulation:
    """Every contender on the same steps, the per-step bounds, the fastest group, planning time."""

    config: MixedSimulationConfig
    results: tuple[ContenderResult, ...]
    work_ms: tuple[float, ...]
    longest_ms: tuple[float, ...]
    fastest_group: str
    planning_ms: float

    @property
    def bound_ms(self) -> tuple[float, ...]:
        return tuple(max(w, s) for w, s in zip(self.work_ms, self.longest_ms))

    def ratio(self, result: ContenderResult) -> float:
        """Mean predicted step over the mean bound."""
        return result.mean_ms / float(np.mean(self.bound_ms))

    def exact_ratio(self, result: ContenderResult) -> float:
        """Mean exactly timed step over the mean bound."""
        return result.exact_mean_ms / float(np.mean(self.bound_ms))


def simulate_mixed(spaces: ClusterSpaces, documents: np.ndarray, config: MixedSimulationConfig) -> MixedSimulation:
    """Plan with both planners, list the baselines' candidates, plan every held-out step with
    every candidate and bound it (:func:`simulate_mixed`).

    ==========================  ======================================  ========================
    contender                   pipelines                               batching
    ==========================  ======================================  ========================
    ``mixed_planner``           the mixed planner's strategies (one     dispatch + balanced
                                per serving range): plain and            packing (Hydraulis),
                                cross-type staged pipelines              best strategy per step
    ``type_segregated``         the same search over plain schemes      dispatch + balanced
                                only: each pipeline on one device type   packing, per step
    ``flashflex``               ``n`` copies of one cross-type staged    fixed packing to the
                                pipeline with per-stage tp holding       context length, dealt
                                ``S`` (as many as the groups take)       round-robin
    ``homogeneous_fastest``     ``⌊N_g/D⌋`` copies of one plain scheme   dispatch + balanced
                                holding ``S`` on the fastest group,      packing
                                the other groups idle
    ==========================  ======================================  ========================

    The two planners search on ``planner_steps`` sampled steps (the mixed one also from the
    type-segregated answer and from every FlashFlex-style candidate, so its ``J`` is never above
    theirs); every contender is then planned
    by the real dispatcher (:func:`hydraulis.dispatch.dispatch`) on the same held-out steps
    (another seed), each pipeline with its own bottleneck coefficients and capacity
    (:func:`hydraulis.planner.mixed.mixed_proposal`), which charges every stage the pipeline's
    bottleneck; the same plans are also timed by the exact staged schedule (each stage at its own
    time, :meth:`hydraulis.cost.staged.StagedCost.pipeline_ms`). The FlashFlex-style and homogeneous
    contenders keep, with hindsight, their candidate with the lowest mean step. The *fastest group*
    is the one whose cheapest layer costs the fewest device-ms per token of a reference sequence of
    ``S/8`` tokens. Every step is also bounded from below (:mod:`hydraulis.cost.mixed_bound`);
    a contender's ratio is its mean step over the mean bound.
    """
    planner = config.planner
    budget, limit = planner.token_budget, planner.max_seq_len
    planner_steps = sample_batches(documents, budget, planner.steps, limit, planner.seed)
    steps = sample_batches(documents, budget, config.steps, limit, planner.seed + 1)
    started = time.perf_counter()
    options = mixed_options(spaces, planner.options)
    plans = plan_cluster(spaces, planner_steps, options, planner)
    planning_ms = (time.perf_counter() - started) * 1e3
    fastest = fastest_group(spaces, limit // 8)
    on_fastest = [o for o in options if not o.cross and o.usage[spaces.cluster.names.index(fastest)] > 0]
    candidates = {
        MixedContender.PLANNER: [[p.strategy for p in plans.mixed]],
        MixedContender.SEGREGATED: [[p.strategy for p in plans.segregated]],
        MixedContender.FLASHFLEX: [[s] for s in plans.replicas],
        MixedContender.HOMOGENEOUS_FASTEST: [[s] for s in replicas(spaces, on_fastest, limit)],
    }
    results = tuple(_best(spaces, contender, [mixed_proposal(spaces, c, budget, limit) for c in strategies], steps)
                    for contender, strategies in candidates.items() if strategies)
    coefficients = layer_work_coefficients(spaces)
    holders = [staged_cost(spaces, o.scheme) for o in options]
    devices = [g.devices for g in spaces.cluster.groups]
    bounds = [mixed_bound(coefficients, devices, s, [c for c in holders if c.max_seq_len >= int(s.max())])
              for s in steps]
    return MixedSimulation(config, results, tuple(b.work_ms for b in bounds), tuple(b.longest_ms for b in bounds),
                           fastest, planning_ms)


def fastest_group(spaces: ClusterSpaces, tokens: int) -> str:
    """The group whose cheapest layer takes the fewest device-ms for a sequence of ``tokens``."""
    costs = [min(float(sequence_work_ms(a, b, tokens)) for a, b in group) for group in layer_work_coefficients(spaces)]
    return spaces.cluster.names[int(np.argmin(costs))]


def _best(spaces: ClusterSpaces, contender: MixedContender, proposals: Sequence[Proposal],
          steps: Sequence[np.ndarray]) -> ContenderResult:
    """The candidate with the lowest mean predicted step on ``steps``, its plans also timed exactly."""
    best, best_plans = None, []
    for proposal in proposals:
        plans = [dispatch(proposal, s, contender.method) for s in steps]
        if best is None or np.mean([p.predicted_ms for p in plans]) < np.mean([p.predicted_ms for p in best_plans]):
            best, best_plans = proposal, plans
    costs = {}
    exact = []
    for plan in best_plans:
        for pipeline in plan.pipelines:
            if pipeline.scheme not in costs:
                costs[pipeline.scheme] = staged_cost(spaces, pipeline.scheme)
        slowest = max(p.predicted_ms for p in plan.pipelines)
        timed = [costs[p.scheme].pipeline_ms([mb.lengths for mb in p.micro_batches]) if p.micro_batches else 0.0
                 for p in plan.pipelines]
        exact.append(max(timed) + plan.predicted_ms - slowest)
    return ContenderResult(contender, "; ".join(str(p.strategy) for p in best.strategies),
                           tuple(p.predicted_ms for p in best_plans), tuple(exact))

"""Simulate training on a mixed cluster: four systems on the same cost model and steps (design §18.4).

==========================  ======================================  ========================
contender                   pipelines                               batching
==========================  ======================================  ========================
``mixed_planner``           the mixed planner's strategy: plain     dispatch + balanced
                            and cross-type staged pipelines          packing (Hydraulis)
``type_segregated``         the same search over plain schemes      dispatch + balanced
                            only: each pipeline on one device type   packing
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
(:func:`hydraulis.planner.mixed.mixed_proposal`). The FlashFlex-style and homogeneous
contenders keep, with hindsight, their candidate with the lowest mean step. The *fastest group*
is the one whose cheapest layer costs the fewest device-ms per token of a reference sequence of
``S/8`` tokens. Every step is also bounded from below (:mod:`hydraulis.cost.mixed_bound`);
a contender's ratio is its mean step over the mean bound.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np

from hydraulis.cluster import ClusterSpaces
from hydraulis.cost.mixed_bound import layer_work_coefficients, mixed_bound
from hydraulis.cost.staged import staged_cost
from hydraulis.dispatch import dispatch
from hydraulis.errors import require, require_int
from hydraulis.planner.mixed import MixedSearchConfig, mixed_proposal, plan_mixed, strategy_of
from hydraulis.planner.mixed_options import MixedOption, OptionsConfig, mixed_options
from hydraulis.types import BatchingMethod, Proposal
from hydraulis.workload import sample_batches


class MixedContender(str, Enum):
    """A system of the comparison (module docstring)."""

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
    """Tokens per step, longest sequence, steps simulated and sampled by the planners, seed,
    the planners' evaluation budget and which cross-type pipelines they consider."""

    token_budget: int
    max_seq_len: int
    steps: int = 100
    planner_steps: int = 16
    seed: int = 0
    evaluations: int = 400
    cps: tuple[int, ...] = (1, 2, 4)
    budgets: tuple[int, ...] = (8, 16)
    targets: tuple[float, ...] = (1.0, 0.25)

    def __post_init__(self) -> None:
        for name in ("token_budget", "max_seq_len", "steps", "planner_steps", "evaluations"):
            require_int(getattr(self, name), name, minimum=1)
        require(self.token_budget >= self.max_seq_len, "token_budget", self.token_budget,
                f"is smaller than one sequence of max_seq_len = {self.max_seq_len} tokens")


@dataclass(frozen=True)
class ContenderResult:
    """One contender: its strategy, predicted step per held-out step, and their mean."""

    contender: MixedContender
    strategy: str
    step_ms: tuple[float, ...]

    @property
    def mean_ms(self) -> float:
        return float(np.mean(self.step_ms))


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


def simulate_mixed(spaces: ClusterSpaces, documents: np.ndarray, config: MixedSimulationConfig) -> MixedSimulation:
    """Plan with both planners, list the baselines' candidates, plan every held-out step with
    every candidate and bound it (module docstring)."""
    budget, limit = config.token_budget, config.max_seq_len
    planner_steps = sample_batches(documents, budget, config.planner_steps, limit, config.seed)
    steps = sample_batches(documents, budget, config.steps, limit, config.seed + 1)
    started = time.perf_counter()
    options = mixed_options(spaces, OptionsConfig(limit, config.cps, config.budgets, config.targets))
    search = MixedSearchConfig(limit, config.evaluations)
    segregated = plan_mixed(spaces, [o for o in options if not o.cross], planner_steps, search)
    flashflex = _replicated(spaces, [o for o in options if o.cross], budget, limit)
    planned = plan_mixed(spaces, options, planner_steps, search,
                         starts=(segregated.strategy, *(p.strategies[0].strategy for p in flashflex)))
    planning_ms = (time.perf_counter() - started) * 1e3
    fastest = fastest_group(spaces, limit // 8)
    candidates = {
        MixedContender.PLANNER: [mixed_proposal(spaces, planned.strategy, budget, limit, "mixed planner")],
        MixedContender.SEGREGATED: [mixed_proposal(spaces, segregated.strategy, budget, limit, "type-segregated")],
        MixedContender.FLASHFLEX: flashflex,
        MixedContender.HOMOGENEOUS_FASTEST: _replicated(
            spaces, [o for o in options if not o.cross and o.usage[spaces.cluster.names.index(fastest)] > 0],
            budget, limit),
    }
    results = tuple(_best(contender, proposals, steps) for contender, proposals in candidates.items() if proposals)
    coefficients = layer_work_coefficients(spaces)
    holders = [staged_cost(spaces, o.scheme) for o in options]
    devices = [g.devices for g in spaces.cluster.groups]
    bounds = [mixed_bound(coefficients, devices, s, [c for c in holders if c.max_seq_len >= int(s.max())])
              for s in steps]
    return MixedSimulation(config, results, tuple(b.work_ms for b in bounds), tuple(b.longest_ms for b in bounds),
                           fastest, planning_ms)


def fastest_group(spaces: ClusterSpaces, tokens: int) -> str:
    """The group whose cheapest layer takes the fewest device-ms for a sequence of ``tokens``."""
    costs = [min(a * tokens * tokens + b * tokens for a, b in group) for group in layer_work_coefficients(spaces)]
    return spaces.cluster.names[int(np.argmin(costs))]


def _replicated(spaces: ClusterSpaces, options: Sequence[MixedOption], budget: int, limit: int) -> list[Proposal]:
    """Per option holding ``limit``: as many copies as every group it uses takes."""
    devices = [g.devices for g in spaces.cluster.groups]
    proposals = []
    for option in options:
        if option.max_seq_len < limit:
            continue
        count = min(have // used for have, used in zip(devices, option.usage) if used > 0)
        counts = [count if o is option else 0 for o in options]
        proposals.append(mixed_proposal(spaces, strategy_of(options, counts), budget, limit))
    return proposals


def _best(contender: MixedContender, proposals: Sequence[Proposal], steps: Sequence[np.ndarray]) -> ContenderResult:
    """The candidate with the lowest mean predicted step on ``steps``."""
    best = None
    for proposal in proposals:
        times = tuple(dispatch(proposal, s, contender.method).predicted_ms for s in steps)
        if best is None or np.mean(times) < np.mean(best.step_ms):
            best = ContenderResult(contender, str(proposal.strategies[0].strategy), times)
    return best

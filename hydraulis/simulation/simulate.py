"""Simulate training at scale on the cost model: propose once, then plan every step with every
contender (:mod:`.contenders`) and record what each predicts.

The details: :func:`simulate`."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from tqdm import tqdm

from hydraulis.base.placement import communicator_bound
from hydraulis.base.types import Proposal, SchemeSpace, StepPlan
from hydraulis.base.workload import sample_batches
from hydraulis.cost import BoundScheme, step_bound
from hydraulis.dispatch import dispatch
from hydraulis.dispatch.gap import GapBreakdown, gap_breakdown
from hydraulis.dispatch.menu import menu
from hydraulis.dispatch.synthesis import (
    Synthesise,
    SynthesisMemory,
    SynthesisOptions,
    proposal_communicators,
    strategy_communicators,
    synthesise_step,
)
from hydraulis.planner import propose
from hydraulis.planner.options import proposal_options, synthesis_schemes
from hydraulis.simulation.config import SimulationConfig
from hydraulis.simulation.contenders import (
    Contender,
    Family,
    contender_families,
)


@dataclass(frozen=True)
class StepOutcome:
    """One contender on one step: the strategy it ran (index into its proposal, −1 for one
    synthesised for the step), the predicted step time, the plan's lower bound (over the
    strategies it could use) and the planning time."""

    strategy_index: int
    predicted_ms: float
    lower_bound_ms: float
    planning_ms: float


@dataclass(frozen=True)
class Run:
    """A contender's chosen candidate (``proposal``, one of ``candidates``) over every step."""

    contender: Contender
    proposal: Proposal
    candidates: int
    outcomes: tuple[StepOutcome, ...]

    @property
    def predicted_ms(self) -> np.ndarray:
        return np.array([o.predicted_ms for o in self.outcomes])

    @property
    def planning_ms(self) -> np.ndarray:
        return np.array([o.planning_ms for o in self.outcomes])

    @property
    def strategy(self) -> str:
        """What the run used: the proposal's strategy count, or its one strategy."""
        if self.contender.family is Family.PROPOSAL:
            return f"proposal of {len(self.proposal.strategies)} strategies"
        return str(self.proposal.strategies[0].strategy)


@dataclass(frozen=True)
class SimulatedStep:
    """One global batch: sequences, tokens, its longest sequence, and its bounds over every usable
    scheme: design §6's work and longest-sequence terms, the tight bound (cost/bound.py)."""

    sequences: int
    tokens: int
    longest: int
    work_bound_ms: float
    longest_bound_ms: float
    tight_bound_ms: float

    @property
    def pool_bound_ms(self) -> float:
        """design §6's ``max(work, longest)``."""
        return max(self.work_bound_ms, self.longest_bound_ms)


@dataclass(frozen=True)
class Communicators:
    """Distinct communicators over Hydraulis' steps: the proposal's (warmed before the first
    step), all the run used, and the bound of aligned placement for the schemes it may use."""

    proposal: int
    run: int
    bound: int


@dataclass(frozen=True)
class Simulation:
    """Everything :func:`simulate` found; ``runs`` in :class:`Contender` order."""

    config: SimulationConfig
    proposal: Proposal
    proposal_wall_s: float
    steps: tuple[SimulatedStep, ...]
    runs: tuple[Run, ...]
    gaps: tuple[GapBreakdown, ...] = ()
    communicators: Communicators | None = None

    def run(self, contender: Contender) -> Run:
        return next(r for r in self.runs if r.contender is contender)


def simulate(space: SchemeSpace, lengths: Sequence[int] | np.ndarray, config: SimulationConfig,
             progress: bool = False) -> Simulation:
    """The recipe of :func:`simulate` for documents of ``lengths`` tokens.

    Recipe of :func:`simulate`:

    1. propose strategies for the documents (:func:`hydraulis.planner.propose`), timed;
    2. draw ``steps`` global batches from the same documents, filled to the token budget, with a
       seed the planner did not use (held-out steps, :attr:`SimulationConfig.step_seed`);
    3. list the candidates of each family: the proposal; each proposal strategy holding ``S``
       alone (static); each usable homogeneous strategy holding ``S``;
    4. for every step: its bounds over every usable scheme (design §6's work and longest sequence,
       the tight bound, :func:`hydraulis.cost.step_bound`), then every candidate of every contender
       planned with the contender's batching method (:func:`hydraulis.dispatch.dispatch`; Hydraulis
       with per-step synthesis, :func:`hydraulis.dispatch.synthesis.synthesise_step`, the
       communicators earlier steps created known and the synthesis memory carried on): chosen strategy, predicted step time, the plan's own lower
       bound and the planning wall time; Hydraulis' gap, term by term (:mod:`hydraulis.dispatch.gap`);
    5. per contender, keep the candidate with the lowest mean predicted step time;
    6. count the distinct communicators Hydraulis' steps used (the proposal's, warmed before the
       first step, included) against the bound of aligned placement (:mod:`hydraulis.base.placement`).

    Pure apart from the clock and an optional progress bar: no file I/O (``hydraulis simulate``
    reads the inputs and writes the outputs, :mod:`hydraulis.io.simulation_inputs`,
    :mod:`hydraulis.artifacts.simulation`, :mod:`hydraulis.viz.simulation`).

    Worked example of step 5: two homogeneous candidates predicting (100, 120) ms and (110, 105) ms
    on two steps have means 110 and 107.5 ms; the second is the homogeneous baseline.
    """
    planner = config.planner
    started = time.perf_counter()
    proposal = propose(space, lengths, planner)
    proposal_wall_s = time.perf_counter() - started
    batches = sample_batches(lengths, planner.token_budget, config.steps, planner.max_seq_len, config.step_seed)
    options = proposal_options(space, proposal)
    families = contender_families(space, proposal, options)
    synthesis = SynthesisOptions(config.synthesis, synthesis_schemes(space, proposal)
                                 if config.synthesis is Synthesise.SPACE else (), config.synthesis_evaluations)
    pool = [BoundScheme(o.scheme, o.time, o.capacity, o.reduce_ms) for o in options]
    known = proposal_communicators(proposal)
    memories = [SynthesisMemory() for _ in families[Contender.HYDRAULIS.family]]
    outcomes = {c: [[] for _ in families[c.family]] for c in Contender}
    steps, gaps = [], []
    for batch in tqdm(batches, desc="simulating steps", unit="step", disable=not progress):
        bound = step_bound(batch, pool, planner.devices, space.pipeline_model.p2p_ms,
                           proposal.optimizer_layout.dp == 1)
        steps.append(SimulatedStep(int(batch.size), int(batch.sum()), int(batch.max()), bound.work_ms,
                                   bound.longest_ms, bound.tight_ms))
        for contender in Contender:
            for i, candidate in enumerate(families[contender.family]):
                if contender is Contender.HYDRAULIS:
                    plan, memories[i] = synthesise_step(candidate, batch, contender.method, config.dispatch,
                                                        synthesis, known, memories[i])
                    known |= strategy_communicators(plan.strategy(candidate))
                    gaps.append(gap_breakdown(plan, candidate, pool))
                else:
                    plan = dispatch(candidate, batch, contender.method, config.dispatch)
                outcomes[contender][i].append(_outcome(plan))
    runs = tuple(_best(contender, families[contender.family], outcomes[contender]) for contender in Contender)
    schemes = [g.scheme for g in menu(proposal, synthesis.schemes)]
    counted = Communicators(len(proposal_communicators(proposal)), len(known),
                            communicator_bound(schemes, proposal.devices))
    return Simulation(config, proposal, proposal_wall_s, tuple(steps), runs, tuple(gaps), counted)


def _outcome(plan: StepPlan) -> StepOutcome:
    return StepOutcome(plan.strategy_index, plan.predicted_ms, plan.lower_bound_ms, plan.planning_ms)


def _best(contender: Contender, candidates: Sequence[Proposal], outcomes: list[list[StepOutcome]]) -> Run:
    """The candidate with the lowest mean predicted step time (the first on ties), its
    ``predicted_ms`` set to that mean when it is a one-strategy baseline."""
    means = [float(np.mean([o.predicted_ms for o in steps])) for steps in outcomes]
    best = int(np.argmin(means))
    proposal = candidates[best]
    if contender.family is not Family.PROPOSAL:
        proposal = replace(proposal, strategies=(replace(proposal.strategies[0], predicted_ms=means[best]),))
    return Run(contender, proposal, len(candidates), tuple(outcomes[best]))

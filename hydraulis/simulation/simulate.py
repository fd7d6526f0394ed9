"""Simulate training at scale on the cost model: propose once, then plan every step with every
contender (:mod:`.contenders`) and record what each predicts.

Recipe of :func:`simulate`:

1. propose strategies for the documents (:func:`hydraulis.planner.propose`), timed;
2. draw ``steps`` global batches from the same documents, filled to the token budget, with a
   seed the planner did not use (held-out steps, :attr:`SimulationConfig.step_seed`);
3. list the candidates of each family: the proposal; each proposal strategy holding ``S``
   alone (static); each usable homogeneous strategy holding ``S``;
4. for every step: its work bound (DESIGN §4, over every usable scheme), then every candidate
   of every contender planned with the contender's batching method
   (:func:`hydraulis.dispatch.dispatch`): chosen strategy, predicted step time, the plan's own
   lower bound and the planning wall time;
5. per contender, keep the candidate with the lowest mean predicted step time.

Pure apart from the clock and an optional progress bar: no file I/O (``hydraulis simulate``
reads the inputs and writes the outputs, :mod:`hydraulis.simulation.inputs`,
:mod:`hydraulis.artifacts.simulation`, :mod:`hydraulis.viz.simulation`).

Worked example of step 5: two homogeneous candidates predicting (100, 120) ms and (110, 105) ms
on two steps have means 110 and 107.5 ms; the second is the homogeneous baseline.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from tqdm import tqdm

from hydraulis.cost import lower_bound_ms
from hydraulis.dispatch import dispatch
from hydraulis.planner import propose
from hydraulis.planner.options import proposal_options
from hydraulis.simulation.config import SimulationConfig
from hydraulis.simulation.contenders import (
    Contender,
    Family,
    homogeneous_candidates,
    static_candidates,
)
from hydraulis.types import Proposal, SchemeSpace, StepPlan
from hydraulis.workload import sample_batches


@dataclass(frozen=True)
class StepOutcome:
    """One contender on one step: the strategy it ran (index into its proposal), the predicted
    step time, the plan's lower bound (over the strategies it could use) and the planning time."""

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
    """One global batch: sequences, tokens, its longest sequence and DESIGN §4's work bound."""

    sequences: int
    tokens: int
    longest: int
    work_bound_ms: float


@dataclass(frozen=True)
class Simulation:
    """Everything :func:`simulate` found; ``runs`` in :class:`Contender` order."""

    config: SimulationConfig
    proposal: Proposal
    proposal_wall_s: float
    steps: tuple[SimulatedStep, ...]
    runs: tuple[Run, ...]

    def run(self, contender: Contender) -> Run:
        return next(r for r in self.runs if r.contender is contender)


def simulate(space: SchemeSpace, lengths: Sequence[int] | np.ndarray, config: SimulationConfig,
             progress: bool = False) -> Simulation:
    """The recipe of the module docstring for documents of ``lengths`` tokens."""
    planner = config.planner
    started = time.perf_counter()
    proposal = propose(space, lengths, planner)
    proposal_wall_s = time.perf_counter() - started
    batches = sample_batches(lengths, planner.token_budget, config.steps, planner.max_seq_len, config.step_seed)
    options = proposal_options(space, proposal)
    families = {
        Family.PROPOSAL: (proposal,),
        Family.STATIC: static_candidates(proposal),
        Family.HOMOGENEOUS: homogeneous_candidates(space, proposal, options),
    }
    schemes = [(o.scheme, o.time, o.capacity) for o in options]
    outcomes = {c: [[] for _ in families[c.family]] for c in Contender}
    steps = []
    for batch in tqdm(batches, desc="simulating steps", unit="step", disable=not progress):
        steps.append(SimulatedStep(int(batch.size), int(batch.sum()), int(batch.max()),
                                   lower_bound_ms(batch, schemes, planner.devices)))
        for contender in Contender:
            for i, candidate in enumerate(families[contender.family]):
                plan = dispatch(candidate, batch, contender.method, config.dispatch)
                outcomes[contender][i].append(_outcome(plan))
    runs = tuple(_best(contender, families[contender.family], outcomes[contender]) for contender in Contender)
    return Simulation(config, proposal, proposal_wall_s, tuple(steps), runs)


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

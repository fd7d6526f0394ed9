"""A step plan: one global batch's strategy, its sequences per pipeline and their packing into
micro-batches (design §2, §8), and how a batch is cut (:class:`BatchingMethod`) or a strategy
made for one step (:class:`Synthesis`, design §8.2). Re-exported by :mod:`hydraulis.base.types`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from hydraulis.base.errors import require_int, require_number
from hydraulis.base.pipeline_plan import (
    MicroBatch,
    MicroBatches,
    PipelineClass,
    PipelinePlan,
    PipelinePlans,
    pipeline_classes,
)
from hydraulis.base.strategy import Proposal, Strategy

__all__ = [
    "SYNTHESIS_EVALUATIONS_DEFAULT", "BatchingMethod", "MicroBatch", "MicroBatches", "PipelineClass", "PipelinePlan",
    "PipelinePlans", "StepPlan", "Synthesis", "Synthesise", "pipeline_classes",
]


class BatchingMethod(str, Enum):
    """How one global batch becomes micro-batches (design §2, the paper's baselines)."""

    PADDING = "padding"
    """Pad every sequence to the batch's longest; a fixed number of sequences per micro-batch."""
    FIXED_PACKING = "fixed_packing"
    """Pack to a fixed token capacity, deal micro-batches round-robin (Megatron-LM style)."""
    DISPATCH_FIXED_PACKING = "dispatch_fixed_packing"
    """Stage-1 dispatch of sequences to pipelines, then fixed-capacity packing."""
    DISPATCH_BALANCED_PACKING = "dispatch_balanced_packing"
    """Stage-1 dispatch, then time-balanced packing (Hydraulis)."""


class Synthesise(str, Enum):
    """Which schemes a strategy made for one step may use."""

    OFF = "off"
    """None: the step runs the best proposal strategy."""
    PROPOSAL = "proposal"
    """Counts of the proposal's schemes."""
    SPACE = "space"
    """Counts of the scheme space's schemes and the proposal's."""


SYNTHESIS_EVALUATIONS_DEFAULT = 4
"""Strategies dispatch plans per step while synthesising, unless told otherwise."""


@dataclass(frozen=True)
class Synthesis:
    """A strategy made for one step because it beat every proposal strategy on it, switch
    included: ``reduce_ms`` its reduction, ``switch_ms`` the time to create its
    ``new_communicators`` (those no earlier step had), ``proposal_ms`` the best proposal
    strategy's predicted step time, ``evaluations`` how many strategies the dispatcher planned
    to find it, ``start`` where it came from (a remembered strategy, a neighbour, a fluid answer)."""

    strategy: Strategy
    reduce_ms: float
    switch_ms: float
    new_communicators: int
    proposal_ms: float
    evaluations: int
    start: str

    def __post_init__(self) -> None:
        require_number(self.reduce_ms, "synthesis.reduce_ms", minimum=0.0)
        require_number(self.switch_ms, "synthesis.switch_ms", minimum=0.0)
        require_int(self.new_communicators, "synthesis.new_communicators", minimum=0)
        require_int(self.evaluations, "synthesis.evaluations", minimum=0)


@dataclass(frozen=True)
class StepPlan:
    """One global batch planned: strategy ``strategy_index`` of the proposal — or, when
    ``synthesis`` is set (``strategy_index`` −1), the strategy made for this step — and one
    :class:`PipelinePlan` per pipeline in :meth:`Strategy.expanded` order, stored compactly
    (:class:`PipelinePlans`; a tuple of :class:`PipelinePlan` given is converted). ``predicted_ms``
    includes a synthesised strategy's switch."""

    strategy_index: int
    method: BatchingMethod
    predicted_ms: float
    lower_bound_ms: float
    planning_ms: float
    pipelines: PipelinePlans
    alignment: int = 1
    seed: int = 0
    notes: tuple[str, ...] = ()
    synthesis: Synthesis | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "pipelines", PipelinePlans.of(self.pipelines))

    def strategy(self, proposal: Proposal) -> Strategy:
        """The strategy this plan runs: the synthesised one, or the proposal's."""
        return self.synthesis.strategy if self.synthesis else proposal.strategies[self.strategy_index].strategy

"""The systems a simulation compares, all on the same cost model and the same steps.

The details: :func:`contender_families`."""

from __future__ import annotations

from dataclasses import replace
from enum import Enum

from hydraulis.base.types import BatchingMethod, Proposal, ProposedStrategy, SchemeSpace, SolverReport
from hydraulis.planner.evaluate import CostContext
from hydraulis.planner.options import SchemeOption
from hydraulis.planner.propose import strategy_of


class Family(str, Enum):
    """Which strategies a contender may use."""

    PROPOSAL = "proposal"
    STATIC = "static_heterogeneous"
    HOMOGENEOUS = "homogeneous"


class Contender(str, Enum):
    """A named system of the comparison (:func:`contender_families`)."""

    HYDRAULIS = "hydraulis"
    PROPOSAL_BALANCED_PACKING = "proposal_balanced_packing"
    PROPOSAL_DISPATCH_FIXED_PACKING = "proposal_dispatch_fixed_packing"
    PROPOSAL_FIXED_PACKING = "proposal_fixed_packing"
    PROPOSAL_PADDING = "proposal_padding"
    STATIC_HETEROGENEOUS = "static_heterogeneous"
    HOMOGENEOUS_BALANCED_PACKING = "homogeneous_balanced_packing"
    HOMOGENEOUS_FIXED_PACKING = "homogeneous_fixed_packing"
    HOMOGENEOUS_PADDING = "homogeneous_padding"

    @property
    def family(self) -> Family:
        return _TABLE[self][0]

    @property
    def method(self) -> BatchingMethod:
        return _TABLE[self][1]

    @property
    def label(self) -> str:
        return _TABLE[self][2]


_TABLE = {
    Contender.HYDRAULIS: (Family.PROPOSAL, BatchingMethod.DISPATCH_BALANCED_PACKING,
                          "Hydraulis: strategy chosen from the proposal or synthesised per step, dispatch + "
                          "balanced packing"),
    Contender.PROPOSAL_BALANCED_PACKING: (Family.PROPOSAL, BatchingMethod.DISPATCH_BALANCED_PACKING,
                                          "proposal strategies only (no synthesis), dispatch + balanced packing"),
    Contender.PROPOSAL_DISPATCH_FIXED_PACKING: (Family.PROPOSAL, BatchingMethod.DISPATCH_FIXED_PACKING,
                                                "proposal, dispatch + fixed-capacity packing"),
    Contender.PROPOSAL_FIXED_PACKING: (Family.PROPOSAL, BatchingMethod.FIXED_PACKING,
                                       "proposal, fixed packing dealt round-robin"),
    Contender.PROPOSAL_PADDING: (Family.PROPOSAL, BatchingMethod.PADDING, "proposal, padding"),
    Contender.STATIC_HETEROGENEOUS: (Family.STATIC, BatchingMethod.DISPATCH_BALANCED_PACKING,
                                     "best single heterogeneous strategy (static), dispatch + balanced packing"),
    Contender.HOMOGENEOUS_BALANCED_PACKING: (Family.HOMOGENEOUS, BatchingMethod.DISPATCH_BALANCED_PACKING,
                                             "best homogeneous strategy, dispatch + balanced packing"),
    Contender.HOMOGENEOUS_FIXED_PACKING: (Family.HOMOGENEOUS, BatchingMethod.FIXED_PACKING,
                                          "best homogeneous strategy, fixed packing (Megatron-LM style)"),
    Contender.HOMOGENEOUS_PADDING: (Family.HOMOGENEOUS, BatchingMethod.PADDING,
                                    "best homogeneous strategy, padding"),
}


def contender_families(space: SchemeSpace, proposal: Proposal,
                       options: tuple[SchemeOption, ...]) -> dict[Family, tuple[Proposal, ...]]:
    """The candidates of each family: the proposal; each proposal strategy holding ``S`` alone
    (static); each usable homogeneous strategy holding ``S``.

    =====================================  ========================  ==========================
    contender                              plans every step with      strategies it may use
    =====================================  ========================  ==========================
    ``hydraulis``                          dispatch_balanced_packing  the proposal (chosen per step) or a
                                                                     strategy synthesised for the step
    ``proposal_balanced_packing``          dispatch_balanced_packing  the proposal (chosen per step)
    ``proposal_dispatch_fixed_packing``    dispatch_fixed_packing     the proposal (chosen per step)
    ``proposal_fixed_packing``             fixed_packing              the proposal (chosen per step)
    ``proposal_padding``                   padding                    the proposal (chosen per step)
    ``static_heterogeneous``               dispatch_balanced_packing  one proposal strategy, always
    ``homogeneous_balanced_packing``       dispatch_balanced_packing  one homogeneous strategy
    ``homogeneous_fixed_packing``          fixed_packing              one homogeneous strategy
    ``homogeneous_padding``                padding                    one homogeneous strategy
    =====================================  ========================  ==========================

    ``homogeneous_fixed_packing`` is the Megatron-LM-style baseline (design §13): one layout for
    every replica, sequences packed to the context length and dealt round-robin.

    A *homogeneous strategy* is ``⌊N/D_k⌋`` pipelines of one scheme ``k`` that holds the maximum
    length ``S`` under the proposal's optimizer layout — one per usable scheme
    (:func:`hydraulis.planner.options.scheme_options`: fits memory, tiles nodes, not dominated).
    The *static heterogeneous* candidates are the proposal's strategies that hold ``S``, each used
    alone on every step (one may itself be homogeneous, when the planner found nothing better for
    its range). For each contender the simulation keeps the candidate with the lowest
    mean predicted step time over the simulated steps — the strongest baseline of its kind, chosen
    with hindsight.
    """
    return {
        Family.PROPOSAL: (proposal,),
        Family.STATIC: static_candidates(proposal),
        Family.HOMOGENEOUS: homogeneous_candidates(space, proposal, options),
    }


def homogeneous_candidates(space: SchemeSpace, proposal: Proposal,
                           options: tuple[SchemeOption, ...]) -> tuple[Proposal, ...]:
    """One single-strategy proposal per usable scheme holding ``S``: ``⌊N/D_k⌋`` pipelines of it."""
    context = CostContext(space.model.params, proposal.optimizer_layout, space.reduce_gbps, space.pipeline_model,
                          space.reduce_overlap, space.grad_reduce_bytes)
    candidates = []
    for k, option in enumerate(options):
        if option.capacity < proposal.max_seq_len:
            continue
        strategy = strategy_of(options, [proposal.devices // option.devices if i == k else 0
                                         for i in range(len(options))])
        proposed = ProposedStrategy(strategy, 0, proposal.max_seq_len, 0.0, context.reduction_ms(strategy),
                                    (int(option.memory.headroom_bytes(proposal.max_seq_len)),),
                                    f"homogeneous baseline: {strategy}")
        candidates.append(_alone(proposal, proposed, "homogeneous baseline"))
    return tuple(candidates)


def static_candidates(proposal: Proposal) -> tuple[Proposal, ...]:
    """Each proposal strategy that holds ``S``, alone and serving every step."""
    return tuple(
        _alone(proposal, replace(proposed, serves_from=0, serves_to=proposal.max_seq_len),
               f"strategy {i} of the proposal, static")
        for i, proposed in enumerate(proposal.strategies)
        if proposed.strategy.max_seq_len >= proposal.max_seq_len
    )


def _alone(proposal: Proposal, proposed: ProposedStrategy, what: str) -> Proposal:
    return replace(proposal, strategies=(proposed,), solver=SolverReport("baseline", "simulation", 0.0),
                   explanation=f"{what}: {proposed.strategy} on every step")

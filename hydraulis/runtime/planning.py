"""Step plans for the training loop: the dispatcher (in-process or through the planning service),
one step ahead, on rank 0.

Two ways to choose the step's strategy:

* **proposal** — every step, :func:`hydraulis.dispatch.synthesis.synthesise_step` picks the strategy
  of the proposal with the lowest predicted step time for the batch, or makes one for the step
  when that is faster, its new communicators included (the communicators of the proposal's
  strategies and of the steps before are known), and plans it with the batching method
  (Hydraulis: ``dispatch_balanced_packing``);
* **cycle** — strategy SPECs given on the command line run in turn, step ``t`` the
  ``t mod K``-th; each is a one-strategy proposal (:func:`spec_proposal`) planned with the
  batching method (a homogeneous SPEC with ``fixed_packing`` is the Megatron-LM-style baseline).

:class:`PlanAhead` runs the planning of step ``t + 1`` in a worker thread while step ``t``
executes (dispatch is numpy and Python; the step's torch kernels release the interpreter lock),
so a step waits for its plan only when planning is slower than the step before it. With a
planner URL the worker asks a running ``hydraulis serve`` (:class:`hydraulis.runtime.planner_client.PlannerClient`)
instead of calling dispatch itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace

from hydraulis.base.placement import Communicator, communicators
from hydraulis.base.types import (
    BatchingMethod,
    MicroBatch,
    ModelSpec,
    OptimizerLayout,
    PipelineModel,
    PipelinePlan,
    Proposal,
    ProposedStrategy,
    Scheme,
    SchemeSpace,
    SolverReport,
    StepPlan,
)
from hydraulis.cost import ReductionModel, exposed_reduce_ms
from hydraulis.dispatch import DispatchOptions
from hydraulis.dispatch.synthesis import (
    Synthesise,
    SynthesisMemory,
    SynthesisOptions,
    proposal_communicators,
    synthesise_step,
)
from hydraulis.sharding.pipeline import StrategySplit


@dataclass(frozen=True)
class Planning:
    """How steps are planned: ``proposals`` (one, or one per cycled SPEC when ``cycle``), the
    batching ``method``, dispatch ``options``, the planning service's ``planner_url`` (None:
    dispatch in-process), and with a proposal the ``synthesis`` options (``space``: the scheme
    space ``synthesise`` space sends to the service)."""

    proposals: tuple[Proposal, ...]
    cycle: bool
    method: BatchingMethod
    options: DispatchOptions
    planner_url: str | None = None
    synthesis: SynthesisOptions = SynthesisOptions(Synthesise.OFF)
    space: SchemeSpace | None = None

    def plan(self, step: int, lengths: Sequence[int], client=None,
             known: frozenset[Communicator] | None = None) -> StepPlan:
        """The plan of step ``step``; its ``strategy_index`` indexes the run's strategies (−1: made
        for the step); ``known`` are the communicators the run has created."""
        return self.plan_remembering(step, lengths, client, known)[0]

    def plan_remembering(self, step: int, lengths: Sequence[int], client=None,
                         known: frozenset[Communicator] | None = None,
                         memory: SynthesisMemory = SynthesisMemory()) -> tuple[StepPlan, SynthesisMemory]:
        """:meth:`plan` with the synthesis memory earlier steps passed on, and the memory for the
        next step (:func:`hydraulis.dispatch.synthesis.synthesise_step`; unchanged through the
        planning service)."""
        index = step % len(self.proposals) if self.cycle else 0
        proposal = self.proposals[index]
        synthesis = SynthesisOptions(Synthesise.OFF) if self.cycle else self.synthesis
        if client is not None:
            plan = client.step_plan(proposal, lengths, self.method, self.options, synthesis, self.space)
        else:
            plan, memory = synthesise_step(proposal, lengths, self.method, self.options, synthesis, known, memory)
        return (replace(plan, strategy_index=index) if self.cycle else plan), memory

    def warm_communicators(self) -> frozenset[Communicator]:
        """The communicators of every strategy the run may choose (created before its first step)."""
        return frozenset().union(*(proposal_communicators(p) for p in self.proposals))


def spec_proposal(layout: StrategySplit, model: ModelSpec, devices: int, token_budget: int, max_seq_len: int,
                  pipeline_model: PipelineModel, reduce_gbps: float = 0.0, reduce_overlap: float = 0.0,
                  grad_reduce_bytes: int = 2) -> Proposal:
    """A strategy given as a SPEC as a proposal of that one strategy on ``devices`` devices,
    serving every step; its pipelines' ``max_seq_len`` is their micro-batch capacity, its
    optimizer layout ZeRO-1 over all devices, its reduction time the cost model's exposed one
    (:func:`hydraulis.cost.exposed_reduce_ms`, 0 without a bandwidth) with gradients of
    ``grad_reduce_bytes`` bytes."""
    strategy, optimizer_layout = layout.strategy, OptimizerLayout(devices, 1, 1)
    reduction = exposed_reduce_ms(model.params, strategy.expanded(), optimizer_layout,
                                  ReductionModel(reduce_gbps, reduce_overlap, pipeline_model=pipeline_model,
                                                 gradient_bytes=grad_reduce_bytes))
    proposed = ProposedStrategy(strategy, 0, max_seq_len, 0.0, reduction, (0,) * len(strategy.pipelines),
                                f"given as {layout}")
    return Proposal(model, devices, devices, optimizer_layout, (proposed,), token_budget, max_seq_len,
                    pipeline_model, SolverReport("given", "strategy SPEC", 0.0))


def single_device_plan(lengths: Sequence[int]) -> StepPlan:
    """The whole batch as one micro-batch on one (1,1,1) pipeline: the reference's plan."""
    batch = MicroBatch(tuple(range(len(lengths))), tuple(lengths))
    pipeline = PipelinePlan(Scheme(1, 1, 1), max(lengths), (batch,), 0.0, "reference")
    return StepPlan(0, BatchingMethod.FIXED_PACKING, 0.0, 0.0, 0.0, (pipeline,))


class PlanAhead:
    """Plans one step at a time in a worker thread (module docstring); ``plan`` None plans
    every step as :func:`single_device_plan`. It keeps the communicators the run has created
    (those of every step planned so far), so a strategy made for a later step pays only for new ones."""

    def __init__(self, planning: Planning | None, client=None) -> None:
        self.planning, self.client = planning, client
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hydraulis-plan")
        self.pending: Future | None = None
        self.known = planning.warm_communicators() if planning else frozenset()
        self.memory = SynthesisMemory()

    def submit(self, step: int, lengths: Sequence[int]) -> None:
        if self.planning is None:
            self.pending = self.pool.submit(lambda: (single_device_plan(lengths), self.memory))
        else:
            self.pending = self.pool.submit(self.planning.plan_remembering, step, lengths, self.client, self.known,
                                            self.memory)

    def result(self) -> StepPlan:
        """The submitted step's plan (waits for it); its exception if planning failed."""
        pending, self.pending = self.pending, None
        plan, self.memory = pending.result()
        self.known |= communicators([p.scheme for p in plan.pipelines])
        return plan

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        if self.client is not None:
            self.client.close()

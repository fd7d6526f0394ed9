"""One training step on one rank: weights in, execute a step plan, gradients out, update.

Every rank, whatever its place, (1) finds its place under the step's strategy and the strategy's
stage model, process groups and route, (2) **propagates** the owners' weights to its shards,
(3) runs its micro-batches under 1F1B, (4) **reduces** the gradients into the owners' buffers,
clips and steps the optimizer, and (5) gathers per-rank figures. The recipe in full, the host's
two waits per step, the clock and idle ranks: :meth:`StepRunner.run`; step 1 for every strategy
before the run's first step: :meth:`StepRunner.warm`.
"""

from __future__ import annotations

import logging
from contextlib import nullcontext
from dataclasses import dataclass

import torch

from hydraulis.base.errors import require
from hydraulis.base.placement import RankRange
from hydraulis.base.types import ModelSpec, OptimizerLayout, StepPlan
from hydraulis.job.config import RuntimeOptions
from hydraulis.job.records import StepRecord
from hydraulis.job.schedule import LrSchedule
from hydraulis.runtime.gradients import GradientBuffers
from hydraulis.runtime.launch import RankContext
from hydraulis.runtime.memory.peak import PeakMemory, check_budget
from hydraulis.runtime.model.attention import attention_kernel
from hydraulis.runtime.model.decoder import StageModel
from hydraulis.runtime.model.loss import loss_tokens
from hydraulis.runtime.model.moe import step_statistics
from hydraulis.runtime.model.packing import Documents, pack_micro_batch, packed_rows
from hydraulis.runtime.optimizer.clipping import global_grad_norm
from hydraulis.runtime.optimizer.exchange import Propagation, Reduction, WeightGate
from hydraulis.runtime.optimizer.master import OptimizerShard
from hydraulis.runtime.optimizer.routes import Route, route_plan
from hydraulis.runtime.parallel.group import ParallelGroup
from hydraulis.runtime.parallel.operations import RecordingWork, gather_operations, gather_reduction_overlap, step_clock
from hydraulis.runtime.parallel.pipeline import StageLink, StageWork, run_1f1b
from hydraulis.runtime.rank_map import GroupCache, ProcessGroups, RankMap, RankPlace
from hydraulis.sharding.buckets import bucket_elements
from hydraulis.sharding.kinds import ReduceDtype
from hydraulis.sharding.ownership import OptimizerOwnership
from hydraulis.sharding.pipeline import StrategySplit

log = logging.getLogger(__name__)
REDUCE_DTYPES = {ReduceDtype.FP32: torch.float32, ReduceDtype.BF16: torch.bfloat16}
FIGURES = ("compute_ms", "loss", "propagate_ms", "step_ms", "peak_bytes", "held_bytes")
"""What every rank reports after a step (one all-gather)."""


@dataclass(frozen=True)
class ComputeStage:
    """This rank's part of one strategy (``place`` None: idle under it)."""

    rank_map: RankMap
    place: RankPlace | None
    groups: ProcessGroups
    model: StageModel | None
    params: list[torch.nn.Parameter]
    gradients: GradientBuffers
    route: Route
    link: StageLink | None
    gate: WeightGate | None


class StepRunner:
    """One rank's training state across steps and strategies: its optimizer buffer and, per
    strategy seen, its compute stage; ``schedule`` the learning rate of each update;
    ``rank_ranges`` a mixed cluster's device groups (the rank map places every stage in its
    group's ranges; empty: the contiguous placement)."""

    def __init__(self, model: ModelSpec, context: RankContext, options: RuntimeOptions,
                 layout: OptimizerLayout, schedule: LrSchedule, rank_ranges: tuple[RankRange, ...] = ()) -> None:
        self.model, self.context, self.record = model, context, options.record_operations
        self.rank_ranges, self.schedule = rank_ranges, schedule
        self.placement = OptimizerOwnership(model, layout, context.world_size)
        self.optimizer = OptimizerShard(self.placement, context.rank, options, context.device)
        self.reduce_dtype = REDUCE_DTYPES[options.grad_reduce_dtype.resolve(context.device.type)]
        self.budget, self.overlap = options.device_memory, options.overlap_reduction
        self.allow_math = options.allow_math_attention
        self.compile_layers = options.compile_layers
        self.loss_chunk = options.loss_chunk_tokens
        self.buckets = bucket_elements(options.bucket_mb, self.reduce_dtype.itemsize)
        self.groups = GroupCache(context.new_group if context.world_size > 1 else None)
        self.exchange = (ParallelGroup(context.new_group(list(range(context.world_size))), context.world_size,
                                       context.rank) if context.world_size > 1 else ParallelGroup.single())
        self.stages: dict[str, ComputeStage] = {}
        self.current: ComputeStage | None = None
        self.weights: dict[int, int] = {}
        """Per one-owner stage, the :attr:`~.optimizer.master.OptimizerShard.version` its compute
        weights hold."""

    def warm(self, layouts: tuple[StrategySplit, ...]) -> int:
        """Step 1 of :meth:`run` for every strategy in ``layouts`` before the run's first step —
        process groups, stage models, routes checked, compute weights allocated (then released by
        the next) — so the first step of a strategy pays none of it; the process groups created."""
        created = self.groups.created
        for layout in layouts:
            self._switch(self._stage(layout))
        return self.groups.created - created

    def run(self, step: int, layout: StrategySplit, plan: StepPlan, documents: Documents) -> StepRecord:
        """One step of ``layout`` under ``plan``, and its record.

        Recipe (every rank, whatever its place):

        1. find the rank's place under the step's strategy (:mod:`.rank_map`); the first time a
           strategy is seen, find its process groups (created only for rank sets no strategy used
           before), build its stage model and its :class:`~.optimizer.routes.Route` (kept for later
           steps);
        2. **propagate**: the owners of the optimizer layout send the current weights to the rank's
           shards, in the compute dtype, bucket by bucket
           (:class:`~.optimizer.exchange.Propagation`: all issued now, each waited for just before
           the first forward that uses it);
        3. pack the rank's micro-batches of its pipeline's plan (:mod:`.model.packing`) and run them
           under 1F1B (:mod:`.parallel.pipeline`), each back-propagating its part of the loss
           normalised by the whole batch's loss tokens (:mod:`.model.loss`);
        4. **reduce** the shards' gradients, accumulated over the micro-batches in fp32
           (:mod:`.gradients`), into the owners' buffers, in the ``grad_reduce_dtype``, bucket by
           bucket (:class:`~.optimizer.exchange.Reduction`: each issued as soon as the last
           micro-batch's backward has produced it, all waited for here), take the global gradient
           norm there (:mod:`.optimizer.clipping`) and skip, or clip and step the optimizer at the
           schedule's learning rate (:mod:`.optimizer.master`) — with ``overlap_reduction`` off,
           both exchanges run whole between the phases instead;
        5. gather per-rank figures: each pipeline's measured compute time is its slowest rank's
           (step 3), the step's time the slowest rank's steps 2–4, the reduction's what the step
           took beyond step 2 and the slowest pipeline; the loss is the sum of the last stages'
           parts; with ``record_operations``, every stage's operations in the order they ran, with
           their times (:mod:`.parallel.operations`); with a ``device_memory`` budget, every rank's
           peak bytes of steps 2–4 (:mod:`.memory.peak`), and every rank fails alike when one
           exceeds it; with ``record_operations``, the reduction's time in flight summed over the
           ranks and the part of it during which that rank's own backward was computing
           (:func:`~.parallel.operations.gather_reduction_overlap`).

        The host waits for the device twice per step: for the gradient norm, which decides whether
        the update runs and how much it is clipped, and after the last event, for the step's
        figures; no other wait is the step's own: the plan's broadcast (:mod:`.broadcast`) comes
        before it, and the operations and the reduction's overlap are gathered after it, only with
        ``record_operations``. The phases are timed by events on the device's stream (the step's one
        clock, :func:`~.parallel.operations.step_clock`; the exchanges' buckets are timed on it only
        with ``record_operations``), the losses of the micro-batches are summed on the device,
        shapes come from the plan (:class:`~.parallel.pipeline.StageLink`), and the figures travel
        in one all-gather after the last event. Process groups come from one
        :class:`~.rank_map.GroupCache` per rank; the record counts the communicators a step created
        (none once every rank set was seen). :meth:`StepRunner.warm` does step 1 for every strategy
        the run may choose before its first step (a strategy synthesised for a step is built when it
        first runs; its plan charges the switch).

        A rank the strategy leaves idle (or whose pipeline the plan gives no micro-batch) computes
        nothing but still owns its share of the optimizer layout and takes part in steps 2 and 4.
        Only the current strategy's compute weights are allocated: switching strategy frees the
        previous one's (its modules, groups and routes stay, built once).
        """
        _check_plan(layout, plan)
        created = self.groups.created
        stage = self._switch(self._stage(layout))
        communicators = self.groups.created - created
        tokens = loss_tokens(plan)
        meter = PeakMemory(self.context.device) if self.budget is not None else None
        local = stage.route.local
        with meter.step(self._held(stage)) if meter else nullcontext():
            clock = step_clock(self.context.device)
            buckets_clock = clock if self.record else None
            propagation = None if local else Propagation(stage.route, self.optimizer.master, stage.params,
                                                         self.context.dtype, buckets_clock)
            if local:
                self._refresh_local(stage)
            elif stage.gate is not None and self.overlap and not self.compile_layers:
                stage.gate.propagation = propagation
            else:
                propagation.finish()
            marks = [clock.mark()]
            loss_part = torch.zeros((), dtype=torch.float32, device=self.context.device)
            recording = None
            reduction = None if local else Reduction(stage.route, stage.gradients.grads, self.reduce_dtype,
                                                     self.context.device, buckets_clock)
            if stage.model is not None:
                loss_part, recording = self._compute(stage, plan, documents, tokens, reduction, clock)
            if propagation is not None:
                propagation.finish()
            if stage.gate is not None:
                stage.gate.propagation = None
            marks.append(clock.mark())
            if local and stage.gradients.aliased:
                stage.gradients.settle()
            elif local:
                stage.route.gather_local(stage.gradients.grads(), self.optimizer.grad)
            else:
                reduction.finish(self.optimizer.grad)
            stage.gradients.clear()
            update = self.optimizer.step(global_grad_norm(self.optimizer.grad, self.context.world), self.schedule)
            if local:
                self._refresh_local(stage)
            marks.append(clock.mark())
        propagate_ms, compute_ms, update_ms = clock.elapsed_ms(marks)
        mine = torch.tensor((compute_ms, 0.0, propagate_ms, propagate_ms + compute_ms + update_ms,
                             meter.peak_bytes if meter else 0, meter.held if meter else 0),
                            dtype=torch.float64, device=self.context.device)
        mine[FIGURES.index("loss")] = loss_part
        measured, figures, every = self._gather(stage, mine)
        aux_loss, routed = self._expert_statistics(stage)
        if self.budget is not None:
            check_budget(self.budget, step, [int(v) for v in every[:, FIGURES.index("peak_bytes")]],
                         [int(v) for v in every[:, FIGURES.index("held_bytes")]])
        reduce = max(0.0, figures["step_ms"] - figures["propagate_ms"] - max(measured))
        operations, overlap = (), (0.0, 0.0)
        if self.record:
            leads = stage.place is not None and stage.place.tp_rank == 0 and stage.place.cp_rank == 0
            rows = recording.rows() if recording else []
            operations = gather_operations(rows, leads, stage.rank_map, plan, layout.strategy, self.context.world,
                                           self.context.device)
            overlap = gather_reduction_overlap(reduction.intervals_ms() if reduction else [], rows,
                                               self.context.world, self.context.device)
        return StepRecord(step, str(layout), tokens, figures["loss"], measured,
                          tuple(p.predicted_ms for p in plan.pipelines), figures["propagate_ms"], reduce,
                          figures["step_ms"], plan.predicted_ms, plan.planning_ms,
                          strategy_index=plan.strategy_index, communicators=communicators,
                          operations=operations, lr=update.lr, grad_norm=update.grad_norm, skipped=update.skipped,
                          skipped_steps=self.optimizer.skipped, reduction_inflight_ms=overlap[0],
                          reduction_hidden_ms=overlap[1], exchanged=not local, aux_loss=aux_loss,
                          tokens_per_expert=routed)

    def _expert_statistics(self, stage: ComputeStage) -> tuple[float, tuple[int, ...]]:
        """A mixture of experts' step: its balance loss and the routed copies each expert received,
        summed over the ranks (:func:`~hydraulis.runtime.model.moe.step_statistics`); dense: 0, ()."""
        experts = self.model.experts
        if not self.model.is_moe:
            return 0.0, ()
        place, model = stage.place, stage.model
        mine = torch.zeros(experts + 2, dtype=torch.float64)
        if model is not None:
            mine = step_statistics(model.mixtures, experts, model.sequence_parallel or place.tp_rank == 0,
                                   place.tp_rank == 0 and place.cp_rank == 0)
        total = self.context.world.all_reduce(mine.to(self.context.device)).cpu()
        return float(total[experts] / max(float(total[experts + 1]), 1.0)), tuple(int(c) for c in total[:experts])

    def _compute(self, stage: ComputeStage, plan: StepPlan, documents: Documents, tokens: int,
                 reduction: Reduction | None, clock) -> tuple[torch.Tensor, RecordingWork | None]:
        """This rank's part of the loss (on the device; zero but on a last stage's tp rank 0) and,
        with ``record_operations``, the recording of its operations on ``clock``; with the
        overlap on, each bucket of the gradients goes to ``reduction`` (None: one owner, no
        exchange) once the last backward has produced it."""
        place, model = stage.place, stage.model
        pipeline = plan.pipelines[place.pipeline]
        kernel = attention_kernel(self.context.device, self.context.dtype, self.allow_math)
        batches, cp, shards = pipeline.micro_batches, stage.groups.cp, model.sequence_shards
        work = StageWork(model, lambda j: pack_micro_batch(documents, batches[j], plan.alignment, cp,
                                                           self.context.device, kernel, shards),
                         [packed_rows(mb, plan.alignment, cp.size, shards) for mb in batches], tokens)
        if self.overlap and batches and reduction is not None:
            stage.gradients.arm(len(batches), stage.route.plan.shard_buckets, reduction.ready)
        recording = RecordingWork(work, clock) if self.record else None
        run_1f1b(recording or work, stage.link, len(batches), pipeline.scheme.pp, place.stage)
        return (work.loss if model.last and place.tp_rank == 0 else torch.zeros_like(work.loss)), recording

    def _stage(self, layout: StrategySplit) -> ComputeStage:
        key = str(layout)
        if key not in self.stages:
            rank_map = RankMap(layout.pipelines, self.context.world_size, self.rank_ranges)
            groups = ProcessGroups.create(rank_map, self.context.rank, self.groups)
            place = rank_map.place(self.context.rank)
            model, params, link, gate = None, [], None, None
            if place is not None:
                pipeline = layout.pipelines[place.pipeline]
                model = StageModel(self.model, pipeline, place.stage, groups.tp, groups.cp, self.context.dtype,
                                   self.context.device, self.compile_layers, self.loss_chunk)
                peers = rank_map.hand_off(place)
                log.debug("strategy %s: pipeline %d stage %d tp rank %d receives from %s, sends to %s; gradients "
                          "from %s, to %s", key, place.pipeline, place.stage, place.tp_rank, peers.previous,
                          peers.to_following, peers.following, peers.to_previous)
                link = StageLink(peers, self.context.device, self.context.dtype)
            route = Route(route_plan(self.placement, rank_map, self.context.rank, self.buckets), self.exchange)
            route.check(self.context.device)
            if model is not None:
                params = model.shard_parameters(route.shards)
                gate = WeightGate(model, params, route.plan.shard_buckets)
            gradients = GradientBuffers(params, fp32_main=self.context.dtype != torch.float32)
            self.stages[key] = ComputeStage(rank_map, place, groups, model, params, gradients, route, link, gate)
        return self.stages[key]

    def _switch(self, stage: ComputeStage) -> ComputeStage:
        """Make ``stage`` the current one: the previous strategy's compute weights are released
        (their storage freed) and this one's allocated — one strategy's weights at a time."""
        if stage is not self.current:
            if self.current is not None:
                for param in self.current.params:
                    param.data = param.data.new_empty(0)
                self.current.gradients.release()
            if stage.model is not None and any(param.numel() == 0 for param in stage.params):
                stage.model.allocate()
            self.weights.pop(id(stage), None)
            if stage.route.local:
                self._refresh_local(stage)
                views = stage.route.aliases(self.optimizer.grad) if stage.gradients.fp32_main else None
                if views is not None:
                    stage.gradients.alias(views)
            self.current = stage
        return stage

    def _refresh_local(self, stage: ComputeStage) -> None:
        """One owner (:meth:`~.optimizer.routes.Route.propagate_local`): the compute weights ←
        the master weights when they differ — when laid out, after each update (its time is the
        update's), and at a step whose master weights were loaded since."""
        if self.weights.get(id(stage)) != self.optimizer.version:
            stage.route.propagate_local(self.optimizer.master, stage.params)
            self.weights[id(stage)] = self.optimizer.version

    def _held(self, stage: ComputeStage) -> list[torch.Tensor | None]:
        """The tensors this rank keeps across steps: compute weights, gradient buffers, optimizer buffer."""
        return [*stage.params, *stage.gradients.grads(), *self.optimizer.tensors.values(), self.optimizer.grad]

    def _gather(self, stage: ComputeStage, mine: torch.Tensor
                ) -> tuple[tuple[float, ...], dict[str, float], torch.Tensor]:
        every = self.context.world.all_gather(mine).view(self.context.world_size, len(FIGURES)).cpu()
        pipelines = len(stage.rank_map.pipelines)
        measured = tuple(max(float(every[r, 0]) for r in stage.rank_map.pipeline_ranks(p)) for p in range(pipelines))
        figures = {name: float(every[:, i].max()) for i, name in enumerate(FIGURES)}
        figures["loss"] = float(every[:, FIGURES.index("loss")].sum())
        return measured, figures, every


def _check_plan(layout: StrategySplit, plan: StepPlan) -> None:
    schemes = tuple(p.scheme for p in layout.pipelines)
    planned = tuple(p.scheme for p in plan.pipelines)
    require(planned == schemes, "step_plan.pipelines", [str(s) for s in planned],
            f"must match the strategy's pipelines {[str(s) for s in schemes]}")

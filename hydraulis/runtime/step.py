"""One training step on one rank: weights in, execute a step plan, gradients out, update.

Recipe (every rank, whatever its place):

1. find the rank's place under the step's strategy (:mod:`.rank_map`); the first time a
   strategy is seen, create its process groups, its stage model and its :class:`~.optimizer.routes.Route`
   (kept for later steps);
2. **propagate**: the owners of the optimizer layout send the current weights to the rank's
   shards (:meth:`Route.propagate`, in the compute dtype);
3. pack the rank's micro-batches of its pipeline's plan (:mod:`.model.packing`) and run them under
   1F1B (:mod:`.parallel.pipeline`), each back-propagating its part of the loss normalised by
   the whole batch's loss tokens (:mod:`.model.loss`);
4. **reduce** the shards' gradients into the owners' buffers (:meth:`Route.reduce`) and step the
   optimizer there (:mod:`.optimizer.master`);
5. gather per-rank figures: each pipeline's measured compute time is its slowest rank's (step 3),
   the step's time the slowest rank's steps 2–4, the reduction's what the step took beyond
   step 2 and the slowest pipeline; the loss is the sum of the last stages' parts.

A rank the strategy leaves idle (or whose pipeline the plan gives no micro-batch) computes
nothing but still owns its share of the optimizer layout and takes part in steps 2 and 4. Only
the current strategy's compute weights are allocated: switching strategy frees the previous
one's (its modules, groups and routes stay, built once).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

from hydraulis.errors import require
from hydraulis.runtime.model.attention import use_varlen_kernel
from hydraulis.runtime.config import RuntimeOptions
from hydraulis.runtime.launch import RankContext
from hydraulis.runtime.layout import StrategyLayout
from hydraulis.runtime.model.loss import loss_tokens
from hydraulis.runtime.optimizer.master import OptimizerShard
from hydraulis.runtime.model.decoder import StageModel
from hydraulis.runtime.model.packing import Documents, pack_micro_batch
from hydraulis.runtime.parallel.pipeline import StageLink, StageWork, run_1f1b
from hydraulis.runtime.optimizer.placement import OptimizerPlacement
from hydraulis.runtime.rank_map import ProcessGroups, RankMap, RankPlace
from hydraulis.runtime.records import StepRecord
from hydraulis.runtime.optimizer.routes import Route, route_plan
from hydraulis.types import ModelSpec, OptimizerLayout, StepPlan

FIGURES = ("compute_ms", "loss", "propagate_ms", "step_ms")
"""What every rank reports after a step (one all-gather)."""


@dataclass(frozen=True)
class ComputeStage:
    """This rank's part of one strategy (``place`` None: idle under it)."""

    rank_map: RankMap
    place: RankPlace | None
    groups: ProcessGroups
    model: StageModel | None
    params: list[torch.nn.Parameter]
    route: Route
    link: StageLink | None


class StepRunner:
    """One rank's training state across steps and strategies: its optimizer buffer and, per
    strategy seen, its compute stage."""

    def __init__(self, model: ModelSpec, context: RankContext, options: RuntimeOptions,
                 layout: OptimizerLayout) -> None:
        self.model, self.context = model, context
        self.placement = OptimizerPlacement(model, layout, context.world_size)
        self.optimizer = OptimizerShard(self.placement, context.rank, options, context.device)
        self.stages: dict[str, ComputeStage] = {}
        self.current: ComputeStage | None = None

    def run(self, step: int, layout: StrategyLayout, plan: StepPlan, documents: Documents) -> StepRecord:
        """Steps 1–5 of the module docstring."""
        _check_plan(layout, plan)
        stage = self._switch(self._stage(layout))
        tokens = loss_tokens(plan)
        start = time.perf_counter()
        stage.route.propagate(self.optimizer.master, stage.params)
        self._synchronize()
        propagated = time.perf_counter()
        loss_part = 0.0
        if stage.model is not None:
            loss_part = self._compute(stage, plan, documents, tokens)
        self._synchronize()
        computed = time.perf_counter()
        stage.route.reduce([p.grad for p in stage.params], self.optimizer.grad)
        for param in stage.params:
            param.grad = None
        self.optimizer.step()
        self._synchronize()
        done = time.perf_counter()
        mine = ((computed - propagated) * 1e3, loss_part, (propagated - start) * 1e3, (done - start) * 1e3)
        measured, figures = self._gather(stage, mine)
        reduce = max(0.0, figures["step_ms"] - figures["propagate_ms"] - max(measured))
        return StepRecord(step, str(layout), tokens, figures["loss"], measured,
                          tuple(p.predicted_ms for p in plan.pipelines), figures["propagate_ms"], reduce,
                          figures["step_ms"], plan.predicted_ms, plan.planning_ms,
                          strategy_index=plan.strategy_index)

    def _compute(self, stage: ComputeStage, plan: StepPlan, documents: Documents, tokens: int) -> float:
        place, model = stage.place, stage.model
        pipeline = plan.pipelines[place.pipeline]
        varlen = use_varlen_kernel(self.context.device, self.context.dtype, pipeline.scheme.cp)
        batches = [pack_micro_batch(documents, mb, plan.alignment, stage.groups.cp, self.context.device, varlen,
                                    model.sequence_shards)
                   for mb in pipeline.micro_batches]
        work = StageWork(model, batches, tokens)
        run_1f1b(work, stage.link, len(batches), pipeline.scheme.pp, place.stage)
        return work.loss if model.last and place.tp_rank == 0 else 0.0

    def _stage(self, layout: StrategyLayout) -> ComputeStage:
        key = str(layout)
        if key not in self.stages:
            rank_map = RankMap(layout.pipelines, self.context.world_size)
            new_group = dist.new_group if self.context.world_size > 1 else None
            groups = ProcessGroups.create(rank_map, self.context.rank, new_group)
            place = rank_map.place(self.context.rank)
            model, params, link = None, [], None
            if place is not None:
                pipeline = layout.pipelines[place.pipeline]
                model = StageModel(self.model, pipeline, place.stage, groups.tp, groups.cp, self.context.dtype,
                                   self.context.device)
                link = StageLink(rank_map.neighbour(place, -1), rank_map.neighbour(place, 1), self.context.device,
                                 self.context.dtype)
            route = Route(route_plan(self.placement, rank_map, self.context.rank), self.context.world)
            route.check(self.context.device)
            if model is not None:
                params = model.shard_parameters(route.shards)
            self.stages[key] = ComputeStage(rank_map, place, groups, model, params, route, link)
        return self.stages[key]

    def _switch(self, stage: ComputeStage) -> ComputeStage:
        """Make ``stage`` the current one: the previous strategy's compute weights are released
        (their storage freed) and this one's allocated — one strategy's weights at a time."""
        if stage is not self.current:
            if self.current is not None:
                for param in self.current.params:
                    param.data = param.data.new_empty(0)
            for param, shard in zip(stage.params, stage.route.shards):
                if param.numel() == 0:
                    param.data = param.data.new_empty(shard.shape)
            self.current = stage
        return stage

    def _gather(self, stage: ComputeStage, mine: tuple[float, ...]) -> tuple[tuple[float, ...], dict[str, float]]:
        local = torch.tensor(mine, dtype=torch.float64, device=self.context.device)
        every = self.context.world.all_gather(local).view(self.context.world_size, len(FIGURES)).cpu()
        pipelines = len(stage.rank_map.pipelines)
        measured = tuple(max(float(every[r, 0]) for r in stage.rank_map.pipeline_ranks(p)) for p in range(pipelines))
        figures = {name: float(every[:, i].max()) for i, name in enumerate(FIGURES)}
        figures["loss"] = float(every[:, FIGURES.index("loss")].sum())
        return measured, figures

    def _synchronize(self) -> None:
        if self.context.device.type == "cuda":
            torch.cuda.synchronize(self.context.device)


def _check_plan(layout: StrategyLayout, plan: StepPlan) -> None:
    schemes = tuple(p.scheme for p in layout.pipelines)
    planned = tuple(p.scheme for p in plan.pipelines)
    require(planned == schemes, "step_plan.pipelines", [str(s) for s in planned],
            f"must match the strategy's pipelines {[str(s) for s in schemes]}")

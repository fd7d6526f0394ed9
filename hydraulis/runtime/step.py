"""One training step on one rank: execute a step plan, reduce gradients, update.

Recipe (every rank, whatever its place):

1. find the rank's place under the step's strategy (:mod:`.rank_map`); the first time a
   strategy is seen, create its process groups and its stage model (kept for later steps);
2. copy the stage's shards out of the master weights (:meth:`StageModel.load`);
3. pack the rank's micro-batches of its pipeline's plan (:mod:`.packing`) and run them under
   1F1B (:mod:`.parallel.pipeline`), each back-propagating its part of the loss normalised by
   the whole batch's loss tokens (:mod:`.loss`);
4. reduce gradients into the canonical layout over all ranks (:mod:`.grad_sync`) and step the
   optimizer on the master weights;
5. gather per-rank figures: each pipeline's measured time is its slowest rank's compute time
   (steps 2–3), the loss is the sum of the last stages' parts.

A rank the strategy leaves idle does steps 4–5 only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

from hydraulis.errors import require
from hydraulis.runtime.attention import use_varlen_kernel
from hydraulis.runtime.config import RuntimeOptions
from hydraulis.runtime.grad_sync import GradientReducer
from hydraulis.runtime.launch import RankContext
from hydraulis.runtime.layout import StrategyLayout
from hydraulis.runtime.loss import loss_tokens
from hydraulis.runtime.master import MasterWeights, make_optimizer
from hydraulis.runtime.model import StageModel
from hydraulis.runtime.packing import Documents, pack_micro_batch
from hydraulis.runtime.parallel.pipeline import StageLink, StageWork, run_1f1b
from hydraulis.runtime.rank_map import ProcessGroups, RankMap, RankPlace
from hydraulis.runtime.sharding import Shard, stage_shards
from hydraulis.types import ModelSpec, StepPlan


@dataclass(frozen=True)
class StepRecord:
    """What a step did: ``measured_ms`` and ``predicted_ms`` per pipeline (compute, forward and
    backward of its micro-batches), ``reduce_ms`` the gradient reduction and update."""

    step: int
    strategy: str
    tokens: int
    loss: float
    measured_ms: tuple[float, ...]
    predicted_ms: tuple[float, ...]
    reduce_ms: float


@dataclass(frozen=True)
class ComputeStage:
    """This rank's part of one strategy (``place`` None: idle under it)."""

    rank_map: RankMap
    place: RankPlace | None
    groups: ProcessGroups
    model: StageModel | None
    shards: tuple[Shard, ...]
    link: StageLink | None


class StepRunner:
    """One rank's training state across steps and strategies."""

    def __init__(self, model: ModelSpec, context: RankContext, options: RuntimeOptions) -> None:
        self.model, self.context = model, context
        self.master = MasterWeights(model, options.seed, context.device)
        self.optimizer = make_optimizer(options.optimizer, list(self.master.params.values()), options.lr)
        self.reducer = GradientReducer(self.master, context.world)
        self.stages: dict[str, ComputeStage] = {}

    def run(self, step: int, layout: StrategyLayout, plan: StepPlan, documents: Documents) -> StepRecord:
        """Steps 1–5 of the module docstring."""
        _check_plan(layout, plan)
        stage = self._stage(layout)
        tokens = loss_tokens(plan)
        start = time.perf_counter()
        loss_part = 0.0
        if stage.model is not None:
            loss_part = self._compute(stage, plan, documents, tokens)
        self._synchronize()
        computed = time.perf_counter()
        self.reducer.reduce(stage.model, stage.shards)
        self.optimizer.step()
        self._synchronize()
        done = time.perf_counter()
        measured, loss = self._gather(stage, (computed - start) * 1e3, loss_part)
        return StepRecord(step, str(layout), tokens, loss, measured,
                          tuple(p.predicted_ms for p in plan.pipelines), (done - computed) * 1e3)

    def _compute(self, stage: ComputeStage, plan: StepPlan, documents: Documents, tokens: int) -> float:
        place, model = stage.place, stage.model
        model.load(self.master.params, stage.shards)
        pipeline = plan.pipelines[place.pipeline]
        varlen = use_varlen_kernel(self.context.device, self.context.dtype, pipeline.scheme.cp)
        batches = [pack_micro_batch(documents, mb, plan.alignment, stage.groups.cp, self.context.device, varlen)
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
            if place is None:
                self.stages[key] = ComputeStage(rank_map, None, groups, None, (), None)
            else:
                pipeline = layout.pipelines[place.pipeline]
                model = StageModel(self.model, pipeline, place.stage, groups.tp, groups.cp, self.context.dtype,
                                   self.context.device)
                link = StageLink(rank_map.neighbour(place, -1), rank_map.neighbour(place, 1), self.context.device,
                                 self.context.dtype)
                shards = stage_shards(self.model, pipeline, place.stage, place.tp_rank)
                self.stages[key] = ComputeStage(rank_map, place, groups, model, shards, link)
        return self.stages[key]

    def _gather(self, stage: ComputeStage, compute_ms: float, loss_part: float) -> tuple[tuple[float, ...], float]:
        mine = torch.tensor([compute_ms, loss_part], dtype=torch.float64, device=self.context.device)
        every = self.context.world.all_gather(mine).view(self.context.world_size, 2).cpu()
        pipelines = len(stage.rank_map.pipelines)
        measured = tuple(max(float(every[r, 0]) for r in stage.rank_map.pipeline_ranks(p)) for p in range(pipelines))
        return measured, float(every[:, 1].sum())

    def _synchronize(self) -> None:
        if self.context.device.type == "cuda":
            torch.cuda.synchronize(self.context.device)


def _check_plan(layout: StrategyLayout, plan: StepPlan) -> None:
    schemes = tuple(p.scheme for p in layout.pipelines)
    planned = tuple(p.scheme for p in plan.pipelines)
    require(planned == schemes, "step_plan.pipelines", [str(s) for s in planned],
            f"must match the strategy's pipelines {[str(s) for s in schemes]}")

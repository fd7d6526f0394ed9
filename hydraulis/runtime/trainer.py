"""The training loop: global batches → step plans → steps, with checkpoints.

On every rank, for steps ``t = t₀ … K − 1``: the loader yields the global batch of step
``t``, rank 0 takes its plan from the planning thread and broadcasts it, every rank runs the step
under the strategy the plan chose and, after the steps the policy names, writes its part of a
checkpoint. The recipe in full, where the weights start and the line rank 0 logs per step:
:func:`train`. The ranks get a :class:`~hydraulis.runtime.run.TrainingRun` resolved before they
start.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from hydraulis.artifacts.train_log import read_train_log, write_train_log
from hydraulis.base.errors import require
from hydraulis.base.types import ModelSpec, OptimizerLayout, Scheme, StepPlan, TimeCoefficients
from hydraulis.data.loader import LoaderPosition
from hydraulis.job.config import RuntimeOptions
from hydraulis.job.records import StepRecord, format_record
from hydraulis.job.strategy_spec import SpecGroup, strategy_layout
from hydraulis.runtime.broadcast import share_plan
from hydraulis.runtime.checkpoint.hf_import import load_hf_weights
from hydraulis.runtime.checkpoint.store import restore
from hydraulis.runtime.checkpoint.writer import Checkpointer
from hydraulis.runtime.launch import RankContext, run_job, world_size
from hydraulis.runtime.optimizer.master import gather_canonical
from hydraulis.runtime.planning import PlanAhead
from hydraulis.runtime.run import TrainingRun
from hydraulis.runtime.step import StepRunner
from hydraulis.runtime.tensorboard import RunRates, TensorBoardLog
from hydraulis.sharding.pipeline import StrategySplit, even_strategy_split

log = logging.getLogger(__name__)
RECORDS = "train_log.json"
"""Rank 0's step records, handed to the launching process."""


@dataclass(frozen=True)
class TrainResult:
    """Every step's record and, when asked for, the final weights and the first step's reduced
    gradients in canonical form."""

    records: tuple[StepRecord, ...]
    params: dict[str, torch.Tensor] | None = None
    grads: dict[str, torch.Tensor] | None = None


def train(context: RankContext, run: TrainingRun, options: RuntimeOptions, reference: bool = False,
          canonical: bool = False) -> TrainResult:
    """The recipe below on this rank; ``reference``: on one device, each batch as one
    micro-batch (the equivalence check's single-process side, no checkpoints); ``canonical``:
    gather, on every rank, the gradients of the first step and the final weights
    (:func:`~.optimizer.master.gather_canonical`).

    Recipe on every rank, for steps ``t = t₀ … K − 1`` (``t₀`` from the checkpoint resumed, else 0),
    once every strategy the run may choose is built — process groups, stage models, routes
    (:meth:`~.step.StepRunner.warm`), so no step pays for them but one synthesised for its step:

    1. the loader yields the global batch of step ``t`` (every rank runs the same deterministic
       loader, :mod:`.data`, so no tokens travel);
    2. rank 0 takes the plan of step ``t`` from its planning thread (:class:`~.planning.PlanAhead`)
       and broadcasts it (:mod:`.broadcast`); it then hands the batch of step ``t + 1`` to the
       thread, so planning ``t + 1`` overlaps executing ``t``;
    3. every rank runs the step (:class:`~.step.StepRunner`: propagate, 1F1B, reduce, update) under
       the strategy the plan chose;
    4. after the steps the policy names, every rank snapshots its part of a checkpoint to host
       memory and writes it in the background (:mod:`.checkpoint.writer`, :mod:`.checkpoint.store`),
       recording the loader position of the next batch; rank 0 adds the step to TensorBoard when
       asked (:mod:`.tensorboard`).

    The weights start from the seed, the checkpoint resumed (rank 0 logs which), or a Hugging Face
    directory (:mod:`.checkpoint.hf_import`); a run of 0 steps writes that start as checkpoint
    ``step-00000000`` (a conversion).

    Rank 0 logs one line per step::

        step 3  strategy 1,2,1+1,1,2  tokens 251  loss 6.1804  lr 8.682e-04  grad_norm 1.3274  tokens/s 2634  ms measured/predicted 41.2/30.5 | 38.0/33.1  step 95.3/62.0  propagate 3.1  reduce 6.4  plan 2.1 wait 0.0  new groups 0

    (the learning rate of the step's update, the global gradient norm before clipping — ``SKIPPED``
    after it when it was not finite and the update was skipped, with a warning — one
    ``measured/predicted`` compute pair per pipeline, then the whole step against the plan's
    prediction, and the process groups the step created; with ``--record-operations``, ``reduce`` is
    followed by the step's ``(hidden X)``, the share of its reduction in flight while the same
    rank's backward computed, :mod:`hydraulis.job.overlap`). The line and the records are built from
    the figures the step brought to the host (:meth:`~.step.StepRunner.run`); between steps the loop
    reads the device only for a checkpoint's snapshot and, in the equivalence check, the canonical
    gradients.
    """
    layouts = (_single_device_layout(run),) if reference else run.layouts
    layout = _optimizer_layout(run, context, reference)
    ranges = run.cluster.rank_ranges() if run.cluster and not reference else ()
    checkpoints = (Checkpointer(run.checkpoint.root, run.checkpoint.keep, context, run.checkpoint.overwrite)
                   if run.checkpoint and not reference else None)
    runner = StepRunner(run.model, context, options, layout, options.schedule(run.steps), ranges)
    position = LoaderPosition()
    if run.resume and not reference:
        if context.rank == 0:
            log.info("resuming from %s (after step %d)", run.resume.folder, run.resume.manifest.step)
        restore(run.resume.folder, run.resume.manifest, runner.optimizer, context.rank)
        position = run.resume.manifest.position
    elif run.init_from:
        load_hf_weights(run.init_from, runner.optimizer)
    if checkpoints and run.steps == 0:
        checkpoints.save(0, runner.optimizer, run.data, position)
    planner = _planner(run, context, reference)
    board = _tensorboard(run, context, reference)
    batches = run.data.batches(position)
    started = time.perf_counter()
    created = runner.warm(layouts) if run.steps > run.first_step else 0
    if context.rank == 0 and created:
        log.info("warmed %d strategies before the first step: %d process groups in %.0f ms", len(layouts), created,
                 (time.perf_counter() - started) * 1e3)
    records, grads = [], None
    try:
        batch = next(batches) if run.steps > run.first_step else None
        if planner and batch is not None:
            planner.submit(run.first_step, batch.lengths)
        for step in range(run.first_step, run.steps):
            plan, wait_ms = _next_plan(planner, context)
            following = next(batches) if step + 1 < run.steps else None
            if planner and following is not None:
                planner.submit(step + 1, following.lengths)
            record = replace(runner.run(step, _layout_of(layouts, plan, run.model), plan, batch.documents),
                             wait_ms=wait_ms, synthesised=plan.synthesis is not None)
            context.completed(step)
            if context.rank == 0:
                log.info(format_record(record))
                if record.skipped:
                    log.warning("step %d skipped: the gradient norm is %s, the weights and moments are unchanged "
                                "(%d steps skipped so far)", step, record.grad_norm, record.skipped_steps)
            if board:
                board.add(record)
            records.append(record)
            if canonical and grads is None:
                grads = gather_canonical(runner.optimizer, "grad", context.world)
            if checkpoints:
                checkpoints.check()
                if run.checkpoint.due(step + 1, run.steps):
                    checkpoints.save(step + 1, runner.optimizer, run.data, batch.next_position)
            batch = following
        if checkpoints:
            checkpoints.close()
    finally:
        if planner:
            planner.close()
        if board:
            board.close()
    params = gather_canonical(runner.optimizer, "master", context.world) if canonical else None
    return TrainResult(tuple(records), params, grads)


def train_job(context: RankContext, run: TrainingRun, options: RuntimeOptions, folder: str | None = None) -> None:
    """The per-rank body of ``hydraulis train``; rank 0 saves the step records in ``folder``."""
    result = train(context, run, options)
    if context.rank == 0 and folder is not None and result.records:
        write_train_log(Path(folder) / RECORDS, result.records)


def run_training(run: TrainingRun, options: RuntimeOptions, nproc: int = 0,
                 log_level: str = "warning") -> tuple[StepRecord, ...]:
    """Train ``run`` on ``nproc`` local processes (default: the fewest it needs) or, under
    torchrun, as this process's rank; rank 0's step records."""
    if run.cluster is not None:
        world = world_size(nproc, run.devices)
        require(world == run.cluster.devices, "world_size", world, f"must be the cluster's {run.cluster.devices} devices")
    if run.optimizer_layout is not None:
        run.optimizer_layout.check(run.model, nproc or world_size(nproc, run.devices))
    with tempfile.TemporaryDirectory(prefix="hydraulis-train-") as folder:
        run_job(train_job, (run, options, folder), options, nproc, run.devices, log_level)
        saved = Path(folder) / RECORDS
        return read_train_log(saved) if saved.exists() else ()


def _next_plan(planner: PlanAhead | None, context: RankContext) -> tuple[StepPlan, float]:
    """The step's plan on every rank, and how long rank 0 waited for its planning thread (ms)."""
    outcome: StepPlan | BaseException | None = None
    started = time.perf_counter()
    if planner is not None:
        try:
            outcome = planner.result()
        except Exception as error:  # every rank must hear of it: share_plan sends it, then re-raises it
            outcome = error
    waited = (time.perf_counter() - started) * 1e3
    return share_plan(outcome, context.world, context.device), waited


def _planner(run: TrainingRun, context: RankContext, reference: bool) -> PlanAhead | None:
    if context.rank != 0:
        return None
    if reference:
        return PlanAhead(None)
    client = None
    if run.planning.planner_url:
        from hydraulis.runtime.planner_client import TOKEN_VARIABLE, ClientOptions, PlannerClient

        client = PlannerClient(run.planning.planner_url, ClientOptions(token=os.environ.get(TOKEN_VARIABLE) or None))
    return PlanAhead(run.planning, client)


def _tensorboard(run: TrainingRun, context: RankContext, reference: bool) -> TensorBoardLog | None:
    if context.rank != 0 or reference or run.tensorboard_dir is None:
        return None
    peak = run.device.peak_tflops * 1e12 * context.world_size if run.device else 0.0
    return TensorBoardLog(run.tensorboard_dir, run.planning.proposals, run.planning.cycle,
                          RunRates(6 * run.model.params, peak))


def _optimizer_layout(run: TrainingRun, context: RankContext, reference: bool) -> OptimizerLayout:
    if reference:
        return OptimizerLayout(1, 1, 1)
    return run.optimizer_layout or OptimizerLayout(context.world_size, 1, 1)


def _layout_of(layouts: tuple[StrategySplit, ...], plan: StepPlan, model: ModelSpec) -> StrategySplit:
    """The layout of the plan's strategy: one of the run's, or the one synthesised for its step."""
    return even_strategy_split(plan.synthesis.strategy, model) if plan.synthesis else layouts[plan.strategy_index]


def _single_device_layout(run: TrainingRun) -> StrategySplit:
    return strategy_layout((SpecGroup(Scheme(1, 1, 1), 1),), run.model, lambda _: TimeCoefficients(0.0, 0.0, 0.0),
                           max_seq_len=1)

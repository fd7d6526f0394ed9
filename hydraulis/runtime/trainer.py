"""The training loop: global batches → step plans → steps, one log line per step.

Each step ``t``: the batch's lengths (:mod:`.data`), the strategy ``t mod K`` of the config's
``K`` strategies, a plan from :mod:`.simple_plan` (a stand-in for the dispatcher), the batch's
tokens, and :meth:`StepRunner.run`. Rank 0 logs::

    step 3  strategy 1,2,1+1,1,2  tokens 251  loss 6.1804  ms measured/predicted 41.2/30.5 | 38.0/33.1  reduce 6.4

(one ``measured/predicted`` pair per pipeline). The ranks get a
:class:`~hydraulis.runtime.run.TrainingRun` resolved before they start.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import torch

from hydraulis.runtime.config import RuntimeOptions
from hydraulis.runtime.data import step_documents
from hydraulis.runtime.launch import RankContext, run_job
from hydraulis.runtime.layout import StrategyLayout
from hydraulis.runtime.run import TrainingRun
from hydraulis.runtime.simple_plan import simple_plan, single_device_plan
from hydraulis.runtime.step import StepRecord, StepRunner
from hydraulis.runtime.strategy_spec import SpecGroup, strategy_layout
from hydraulis.types import ModelSpec, Scheme, StepPlan, TimeCoefficients

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainResult:
    records: tuple[StepRecord, ...]
    params: dict[str, torch.Tensor]


def train(context: RankContext, run: TrainingRun, options: RuntimeOptions, reference: bool = False) -> TrainResult:
    """Every step of ``run`` on this rank; ``reference``: on one device, each batch as one
    micro-batch (the equivalence check's single-process side)."""
    runner = StepRunner(run.model, context, options)
    planner = _reference_planner(run.model) if reference else _cycle_planner(run)
    records = []
    for step, lengths in enumerate(run.lengths):
        layout, plan = planner(step, lengths)
        record = runner.run(step, layout, plan, step_documents(run.model.vocab, options.seed, step, lengths))
        if context.rank == 0:
            log.info(format_record(record))
        records.append(record)
    return TrainResult(tuple(records), runner.master.state())


def train_job(context: RankContext, run: TrainingRun, options: RuntimeOptions) -> None:
    """The per-rank body of ``hydraulis train``."""
    train(context, run, options)


def run_training(run: TrainingRun, options: RuntimeOptions, nproc: int = 0, log_level: str = "warning") -> None:
    """Train ``run`` on ``nproc`` local processes (default: the most devices a strategy uses)
    or, under torchrun, as this process's rank."""
    run_job(train_job, (run, options), options, nproc, run.devices, log_level)


def format_record(record: StepRecord) -> str:
    pipelines = " | ".join(f"{m:.1f}/{p:.1f}" for m, p in zip(record.measured_ms, record.predicted_ms))
    return (f"step {record.step}  strategy {record.strategy}  tokens {record.tokens}  loss {record.loss:.4f}  "
            f"ms measured/predicted {pipelines}  reduce {record.reduce_ms:.1f}")


Planner = Callable[[int, tuple[int, ...]], tuple[StrategyLayout, StepPlan]]


def _cycle_planner(run: TrainingRun) -> Planner:
    def plan(step: int, lengths: tuple[int, ...]) -> tuple[StrategyLayout, StepPlan]:
        index = step % len(run.layouts)
        layout = run.layouts[index]
        return layout, simple_plan(lengths, layout, run.micro_batch_tokens, run.pipeline_model, index)
    return plan


def _reference_planner(model: ModelSpec) -> Planner:
    layout = strategy_layout((SpecGroup(Scheme(1, 1, 1), 1),), model, lambda _: TimeCoefficients(0.0, 0.0, 0.0),
                             max_seq_len=1)

    def plan(step: int, lengths: tuple[int, ...]) -> tuple[StrategyLayout, StepPlan]:
        return layout, single_device_plan(lengths)
    return plan

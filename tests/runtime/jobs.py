"""Several trainings in one spawned job: the ranks start (import torch, rendezvous) once and
train each run in turn, so tests that each need a short training share that start-up, which is
most of a tiny run's cost. Each training builds its own process groups and optimizer, as a new
job would; only the processes are shared. Also a training whose rank writes its checkpoint
shards slowly (patched in that rank only)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from unittest import mock

from hydraulis.artifacts.train_log import read_train_log, write_train_log
from hydraulis.job.config import RuntimeOptions
from hydraulis.job.records import StepRecord
from hydraulis.runtime.checkpoint import store
from hydraulis.runtime.launch import RankContext, run_job
from hydraulis.runtime.run import TrainingRun
from hydraulis.runtime.trainer import train


def _trainings(context: RankContext, trainings: tuple[tuple[TrainingRun, RuntimeOptions], ...], folder: str) -> None:
    for index, (run, options) in enumerate(trainings):
        result = train(context, run, options)
        if context.rank == 0:
            write_train_log(Path(folder) / f"{index}.json", result.records)


def train_in_one_job(trainings: list[tuple[TrainingRun, RuntimeOptions]], nproc: int) -> list[tuple[StepRecord, ...]]:
    """Rank 0's step records of each ``(run, options)``, trained in order by one job of ``nproc``
    processes (started with the first training's options: device, threads, timeout)."""
    with tempfile.TemporaryDirectory(prefix="hydraulis-trainings-") as folder:
        run_job(_trainings, (tuple(trainings), folder), trainings[0][1], nproc,
                max(run.devices for run, _ in trainings))
        return [read_train_log(Path(folder) / f"{index}.json") for index in range(len(trainings))]


def train_with_a_slow_writer(context: RankContext, run: TrainingRun, options: RuntimeOptions, slow_rank: int,
                             delay_s: float, wrote: str) -> None:
    """``run`` on every rank; rank ``slow_rank`` waits ``delay_s`` before writing each checkpoint
    shard and then records the time it finished in the file ``wrote``."""
    if context.rank != slow_rank:
        train(context, run, options)
        return
    write_shard = store.write_shard

    def slow(path: Path, tensors) -> None:
        time.sleep(delay_s)
        write_shard(path, tensors)
        Path(wrote).write_text(repr(time.time()))

    with mock.patch.object(store, "write_shard", slow):
        train(context, run, options)

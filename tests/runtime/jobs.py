"""Jobs that tests spawn with :func:`~hydraulis.runtime.launch.run_job` instead of starting one
interpreter per rank: the ranks fork from the test process's forkserver, which has imported
torch once, so a job costs a fraction of the interpreters' start-up. Each job patches only the
rank it names."""

from __future__ import annotations

import time
from pathlib import Path
from unittest import mock

from hydraulis.job.config import RuntimeOptions
from hydraulis.runtime.checkpoint import store
from hydraulis.runtime.launch import RankContext
from hydraulis.runtime.run import TrainingRun
from hydraulis.runtime.trainer import train


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

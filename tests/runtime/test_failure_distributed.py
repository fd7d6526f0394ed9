"""A rank that dies or raises: every other rank exits with an error on its own (its collective
timeout, 30 s here, bounds the wait); a checkpoint the failure interrupted is never read, the last
complete one still loads (here by a one-process training in the test's own launcher).

The ranks are started as separate processes with torchrun's environment variables (no launcher
that could end them), each running ``hydraulis train``. The subprocess waits are only hang
guards, far above the collective timeout, so a loaded machine does not fail the test."""

import os
import signal
import subprocess
import sys
import time

import pytest

from hydraulis.job.config import RuntimeOptions, TrainConfig
from hydraulis.runtime.checkpoint.resume import find_checkpoint
from hydraulis.runtime.checkpoint.store import read_canonical
from hydraulis.runtime.run import resolve_run
from hydraulis.runtime.trainer import run_training
from hydraulis.sharding.kinds import DeviceKind
from tests.conftest import free_port

pytestmark = pytest.mark.distributed

WORLD = 3
VICTIM = 1
START_LIMIT_S = 300
"""Hang guard for every wait of these tests."""


FAILING_WRITE = """
import sys
import hydraulis.runtime.checkpoint.store as checkpoint
from hydraulis.cli import main

write_shard = checkpoint.write_shard

def failing(path, shard):
    if "step-00000004" in str(path):
        path.write_bytes(b"half a shard")
        raise OSError("disk full (injected)")
    write_shard(path, shard)

checkpoint.write_shard = failing
sys.exit(main(sys.argv[1:]))
"""


def start_ranks(tmp_path, arguments, world, programs=None):
    """``world`` ranks of ``hydraulis <arguments>``; ``programs[rank]``: python code to run instead."""
    port = free_port()
    logs = [tmp_path / f"rank{r}.log" for r in range(world)]
    ranks = []
    for rank, log in enumerate(logs):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        program = (programs or {}).get(rank)
        command = [sys.executable, *(["-c", program] if program else ["-m", "hydraulis"]), *arguments]
        with log.open("w") as sink:
            ranks.append(subprocess.Popen(command, env=env, stdout=sink, stderr=subprocess.STDOUT))
    return ranks, logs


def stop(ranks):
    for process in ranks:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_killing_one_rank_ends_every_other_rank_with_an_error(tmp_path):
    arguments = ["--log-level", "info", "train", "--model", "tiny", "--strategy", "1,1,2+1,1,1", "--steps", "100000",
                 "--device", "cpu", "--timeout-s", "30"]
    ranks, logs = start_ranks(tmp_path, arguments, WORLD)
    try:
        started = time.monotonic()
        while "step 1 " not in logs[0].read_text():
            assert all(p.poll() is None for p in ranks), [log.read_text()[-2000:] for log in logs]
            assert time.monotonic() - started < START_LIMIT_S, "training never started"
            time.sleep(0.2)
        ranks[VICTIM].send_signal(signal.SIGKILL)
        for rank, process in enumerate(ranks):
            if rank == VICTIM:
                continue
            assert process.wait(timeout=START_LIMIT_S) != 0, logs[rank].read_text()[-2000:]
            assert f"rank {rank} failed" in logs[rank].read_text()
    finally:
        stop(ranks)


def test_a_rank_raising_while_checkpointing_ends_the_job_and_the_last_checkpoint_loads(tmp_path):
    root = tmp_path / "checkpoints"
    arguments = ["--log-level", "info", "train", "--model", "tiny", "--strategy", "1,1,2", "--steps", "100000",
                 "--device", "cpu", "--timeout-s", "30", "--checkpoint-dir", str(root), "--checkpoint-every", "2"]
    ranks, logs = start_ranks(tmp_path, arguments, 2, {1: FAILING_WRITE})
    try:
        assert ranks[1].wait(timeout=START_LIMIT_S) != 0, logs[1].read_text()[-2000:]
        assert ranks[0].wait(timeout=START_LIMIT_S) != 0, logs[0].read_text()[-2000:]
        assert "OSError: disk full (injected)" in logs[1].read_text()
        assert "rank 0 failed" in logs[0].read_text()
    finally:
        stop(ranks)
    assert (root / "step-00000004.partial").is_dir()
    last = find_checkpoint(root)
    assert last.manifest.step == 2 and last.folder.name == "step-00000002"
    weights = read_canonical(last.folder, last.manifest)["master"]
    assert weights["head.weight"].shape == (1024, 64) and bool(weights["head.weight"].isfinite().all())
    options = RuntimeOptions(device=DeviceKind.CPU)
    resumed = run_training(resolve_run(TrainConfig("tiny", ("1,1,1",), 3, resume=str(root), runtime=options)), options, 1)
    assert [(r.step, r.strategy) for r in resumed] == [(2, "1,1,1")]

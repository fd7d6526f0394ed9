"""A job that restarts itself and checkpoints that cannot lie:

* under ``torchrun --max-restarts 2``, a worker killed after the step-4 checkpoint: the group
  restarts, continues from that checkpoint by itself and ends with the uninterrupted run's weights,
  bit for bit (``benchmarks/kill_soak.py`` kills at random moments);
* flipped bytes in the newest checkpoint: named, skipped, and the job falls back to the previous
  one with the uninterrupted run's losses;
* the commit waits for a rank whose write is slow (rank 0 renames only verified files); the slow
  writer is patched into rank 1 of a job spawned by the test (:mod:`tests.runtime.jobs`).
"""

import shutil

import pytest
import torch

from benchmarks.kill_soak import bitwise_equal, final_weights, finish, kill_a_worker, torchrun
from hydraulis.job.config import RuntimeOptions, TrainConfig
from hydraulis.runtime.checkpoint.resume import find_checkpoint
from hydraulis.runtime.checkpoint.store import read_canonical
from hydraulis.runtime.launch import run_job
from hydraulis.runtime.run import resolve_run
from hydraulis.runtime.trainer import run_training
from hydraulis.sharding.kinds import DeviceKind
from tests.runtime.jobs import train_with_a_slow_writer

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

OPTIONS = RuntimeOptions(device=DeviceKind.CPU, seed=1)


def test_a_killed_worker_restarts_the_group_which_finishes_with_the_uninterrupted_weights(tmp_path):
    reference = torchrun(tmp_path / "reference", tmp_path / "reference.log", restarts=0)
    killed = torchrun(tmp_path / "killed", tmp_path / "killed.log")
    assert kill_a_worker(killed, tmp_path / "killed.log", "step-00000004", 0.0, 1)
    assert finish(killed) == 0, (tmp_path / "killed.log").read_text()[-3000:]
    assert finish(reference) == 0, (tmp_path / "reference.log").read_text()[-3000:]
    log = (tmp_path / "killed.log").read_text()
    assert "resuming from" in log and "step-00000004 (after step 4)" in log
    assert bitwise_equal(final_weights(tmp_path / "killed"), final_weights(tmp_path / "reference"))


def train(root, steps, keep=2):
    config = TrainConfig("tiny", ("1,1,1",), steps, token_budget=192, checkpoint_dir=str(root), checkpoint_every=2,
                         keep_checkpoints=keep, runtime=OPTIONS)
    return run_training(resolve_run(config), OPTIONS, 1)


def test_flipped_bytes_in_the_newest_checkpoint_fall_back_to_the_previous_one(tmp_path, caplog):
    straight = train(tmp_path / "straight", 6, keep=3)
    root = tmp_path / "damaged"
    for step in ("step-00000002", "step-00000004"):
        shutil.copytree(tmp_path / "straight" / step, root / step)
    shard = root / "step-00000004" / "shard-00000.pt"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2:len(data) // 2 + 16] = bytes(b ^ 0xFF for b in data[len(data) // 2:len(data) // 2 + 16])
    shard.write_bytes(bytes(data))
    with caplog.at_level("WARNING"):
        resumed = train(root, 6)
    assert "checkpoint step-00000004 skipped: shard-00000.pt has SHA-256" in caplog.text
    assert [r.step for r in resumed] == [2, 3, 4, 5]
    assert [r.loss for r in resumed] == [r.loss for r in straight[2:]]
    ours, theirs = find_checkpoint(root), find_checkpoint(tmp_path / "straight")
    assert bitwise_equal(read_canonical(ours.folder, ours.manifest)["master"],
                         read_canonical(theirs.folder, theirs.manifest)["master"])


def test_the_commit_waits_for_a_slow_rank(tmp_path):
    root = tmp_path / "checkpoints"
    run = resolve_run(TrainConfig("tiny", ("1,1,2",), 2, checkpoint_dir=str(root), runtime=OPTIONS))
    run_job(train_with_a_slow_writer, (run, OPTIONS, 1, 3.0, str(tmp_path / "rank1-wrote")), OPTIONS, 2, run.devices)
    committed = find_checkpoint(root)
    assert committed.folder.name == "step-00000002" and len(committed.manifest.files) == 4
    wrote = float((tmp_path / "rank1-wrote").read_text())
    assert (committed.folder / "manifest.json").stat().st_mtime >= wrote - 0.01
    assert torch.isfinite(read_canonical(committed.folder, committed.manifest)["master"]["head.weight"]).all()

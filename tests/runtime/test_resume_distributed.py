"""Kill and resume: 6 steps straight against 3 steps, a checkpoint, then a new job under another
strategy on another number of processes (so another optimizer layout) for 3 more steps: the same
per-step losses and final weights and moments, up to the fp32 rounding of the other strategy's
sums (measured: 1.2e-7 in the loss, 3.8e-8 relative in the weights)."""

import pytest

from hydraulis.job.config import RuntimeOptions, TrainConfig
from hydraulis.job.schedule import LrScheduleKind
from hydraulis.runtime.checkpoint.resume import find_checkpoint
from hydraulis.runtime.checkpoint.store import read_canonical
from hydraulis.runtime.run import resolve_run
from hydraulis.runtime.trainer import run_training
from hydraulis.sharding.kinds import DeviceKind, OptimizerKind

pytestmark = pytest.mark.distributed

OPTIONS = RuntimeOptions(device=DeviceKind.CPU, optimizer=OptimizerKind.ADAM, lr=1e-3, seed=1, timeout_s=60.0,
                         lr_schedule=LrScheduleKind.CONSTANT)
"""A constant learning rate: the first job stops at step 3 by asking for 3 steps, which would end a
decaying schedule there (the recipe's resume is tests/runtime/test_recipe_distributed.py)."""
FIRST, SECOND = "1,2,1+1,1,2", "1,1,2"


def train(strategies, steps, nproc, root, resume=None):
    config = TrainConfig("tiny", strategies, steps, token_budget=192, nproc=nproc, checkpoint_dir=str(root),
                         resume=None if resume is None else str(resume), runtime=OPTIONS)
    return run_training(resolve_run(config), OPTIONS, nproc)


def test_a_resumed_job_continues_exactly(tmp_path):
    straight = train((FIRST,), 6, 4, tmp_path / "straight")
    before = train((FIRST,), 3, 4, tmp_path / "resumed")
    after = train((SECOND,), 6, 2, tmp_path / "resumed", resume=tmp_path / "resumed")
    assert [r.step for r in before + after] == list(range(6))
    assert [r.strategy for r in after] == [SECOND] * 3
    assert [r.loss for r in before] == [r.loss for r in straight[:3]]
    assert max(abs(a.loss - b.loss) for a, b in zip(after, straight[3:])) <= 1e-6
    ours, theirs = (find_checkpoint(tmp_path / name) for name in ("resumed", "straight"))
    assert ours.manifest.step == theirs.manifest.step == 6
    assert (ours.manifest.optimizer_layout.dp, theirs.manifest.optimizer_layout.dp) == (2, 4)
    assert ours.manifest.position == theirs.manifest.position
    resumed, reference = read_canonical(ours.folder, ours.manifest), read_canonical(theirs.folder, theirs.manifest)
    assert resumed.keys() == reference.keys() == {"master", "exp_avg", "exp_avg_sq"}
    worst = max((resumed["master"][name].double() - tensor.double()).norm().item() / tensor.double().norm().item()
                for name, tensor in reference["master"].items())
    assert worst <= 1e-6
    moments = max((resumed["exp_avg_sq"][name].double() - tensor.double()).norm().item() / tensor.double().norm().item()
                  for name, tensor in reference["exp_avg_sq"].items())
    assert moments <= 1e-4

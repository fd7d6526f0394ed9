"""The same seed, data and plans give bitwise identical losses and weights in two runs (CPU,
gloo): two separate jobs of 4 processes, each cycling a strategy with tp and pp and one with cp
over two steps, then comparing their step losses and the checkpoints they wrote (master
weights and Adam moments) bit for bit."""

import pytest
import torch

from hydraulis.job.config import RuntimeOptions, TrainConfig
from hydraulis.runtime.checkpoint.resume import find_checkpoint
from hydraulis.runtime.checkpoint.store import read_canonical
from hydraulis.runtime.run import resolve_run
from hydraulis.runtime.trainer import run_training
from hydraulis.sharding.kinds import DeviceKind

pytestmark = pytest.mark.distributed


def test_two_runs_are_bitwise_identical(tmp_path):
    options = RuntimeOptions(device=DeviceKind.CPU, seed=5)
    outcomes = []
    for attempt in ("first", "second"):
        config = TrainConfig("tiny", ("1,2,1+1,1,2", "2,1,1+1,1,1x2"), 2, token_budget=192,
                             checkpoint_dir=str(tmp_path / attempt), runtime=options)
        records = run_training(resolve_run(config), options)
        checkpoint = find_checkpoint(tmp_path / attempt)
        outcomes.append(([r.loss for r in records], read_canonical(checkpoint.folder, checkpoint.manifest)))
    (losses, state), (again_losses, again_state) = outcomes
    assert len(losses) == 2 and losses == again_losses
    assert state.keys() == again_state.keys() == {"master", "exp_avg", "exp_avg_sq"}
    for kind, tensors in state.items():
        for name, value in tensors.items():
            assert torch.equal(value, again_state[kind][name]), (kind, name)

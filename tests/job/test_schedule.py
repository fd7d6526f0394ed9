"""The learning-rate schedule: the docstring's worked example, PyTorch's ``LambdaLR`` driven by
it, and the checks on its settings."""

import math

import pytest
import torch

from hydraulis.base.errors import HydraulisError
from hydraulis.job.config import RuntimeOptions, TrainConfig
from hydraulis.job.schedule import LrSchedule, LrScheduleKind


def test_worked_example_and_shapes():
    cosine = LrSchedule(LrScheduleKind.COSINE, 1e-3, 6, 2, 1e-4)
    assert [round(cosine.lr_at(k), 9) for k in range(6)] == [5e-4, 1e-3, 1e-3, 8.68198e-4, 5.5e-4, 2.31802e-4]
    linear = LrSchedule(LrScheduleKind.LINEAR, 1.0, 4, 0, 0.0)
    assert [linear.lr_at(k) for k in range(4)] == [1.0, 0.75, 0.5, 0.25]
    assert {LrSchedule(LrScheduleKind.CONSTANT, 2.0, 5, 1).lr_at(k) for k in range(5)} == {2.0}
    assert math.isclose(LrSchedule(LrScheduleKind.COSINE, 1.0, 10, 10).lr_at(9), 1.0)


def test_lambda_lr_follows_the_schedule():
    schedule = LrSchedule(LrScheduleKind.COSINE, 3e-4, 8, 3, 3e-5)
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=schedule.lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule.factor)
    for k in range(8):
        assert math.isclose(optimizer.param_groups[0]["lr"], schedule.lr_at(k), rel_tol=1e-12)
        optimizer.step()
        scheduler.step()


@pytest.mark.parametrize("options, steps, words", [
    ({"weight_decay": -1.0}, 5, "weight_decay: -1.0 must be >= 0"),
    ({"clip_grad_norm": 0.0}, 5, "clip_grad_norm: 0.0 must be > 0"),
    ({"warmup_steps": 6}, 5, "warmup_steps: 6 must be at most steps = 5"),
    ({"min_lr": 0.01}, 5, "min_lr: 0.01 must be between 0 and lr = 0.001"),
    ({"lr_schedule": "step"}, 5, "lr_schedule: 'step' must be one of ['constant', 'linear', 'cosine']"),
    ({"betas": (0.9, 1.0)}, 5, "betas[1]: 1.0 must be >= 0 and < 1"),
])
def test_bad_recipes_name_the_field_the_value_and_the_limit(options, steps, words):
    with pytest.raises(HydraulisError) as error:
        TrainConfig("tiny", ("1,1,1",), steps, runtime=RuntimeOptions(**options))
    assert str(error.value).startswith(words)

"""One owner, no exchange: a one-device job copies its gradients into the optimizer's buffer and
the updated weights back in place — no all-to-all, no propagation — and trains exactly as the
exchanges would have."""

import pytest
import torch

from hydraulis.job.config import RuntimeOptions, TrainConfig
from hydraulis.runtime import step
from hydraulis.runtime.gradients import GradientBuffers
from hydraulis.runtime.launch import RankContext
from hydraulis.runtime.optimizer.routes import Route
from hydraulis.runtime.run import resolve_run
from hydraulis.runtime.trainer import train
from hydraulis.sharding.kinds import DeviceKind, OptimizerKind, Precision

OPTIONS = RuntimeOptions(device=DeviceKind.CPU, precision=Precision.FP32, optimizer=OptimizerKind.ADAM, lr=1e-3)
BF16 = RuntimeOptions(device=DeviceKind.CPU, precision=Precision.BF16, optimizer=OptimizerKind.ADAM, lr=1e-3)


def _train(options=OPTIONS):
    run = resolve_run(TrainConfig("tiny", ("1,1,1",), 3, token_budget=256, max_seq_len=128, runtime=options))
    return train(RankContext.single(options), run, options, canonical=True)


def test_a_one_device_job_records_no_exchange_and_no_propagation(monkeypatch):
    def refused(*_args, **_kwargs):
        raise AssertionError("a one-device job exchanged")

    monkeypatch.setattr(step, "Propagation", refused)
    monkeypatch.setattr(step, "Reduction", refused)
    records = _train().records
    assert [r.exchanged for r in records] == [False] * 3


@pytest.mark.parametrize("options", [OPTIONS, BF16], ids=["fp32", "bf16 (main gradients aliased)"])
def test_one_owner_trains_bitwise_as_the_exchanges_would(options, monkeypatch):
    aliased = []
    monkeypatch.setattr(GradientBuffers, "settle", _spy(GradientBuffers.settle, aliased))
    local = _train(options)
    assert bool(aliased) == (options is BF16)
    monkeypatch.setattr(Route, "check", lambda self, device: None)
    exchanged = _train(options)
    assert [r.exchanged for r in exchanged.records] == [True] * 3
    assert [r.loss for r in local.records] == [r.loss for r in exchanged.records]
    for name, weight in local.params.items():
        assert torch.equal(weight, exchanged.params[name]), name


def _spy(method, calls):
    def spied(self, *args):
        calls.append(self)
        return method(self, *args)

    return spied

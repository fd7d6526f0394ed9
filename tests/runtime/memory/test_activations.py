"""The activation accounting against the runtime, measured on the CPU (:mod:`.tracking`): what
a micro-batch leaves allocated after its forward (within 1 %), the peak of a stage's 1F1B run
(within 10 %), per option and per layer."""

from unittest import mock

import numpy as np
import pytest
import torch

from hydraulis.base.types import MicroBatch, ModelSpec, Recompute, Scheme
from hydraulis.runtime.model import decoder
from hydraulis.runtime.model.decoder import StageModel
from hydraulis.runtime.model.packing import PackedMicroBatch, pack_micro_batch
from hydraulis.runtime.parallel.pipeline import StageWork, run_1f1b
from hydraulis.sharding.activations import Widths, micro_batch_bytes_per_token, stage_activation_bytes
from hydraulis.sharding.pipeline import PipelineSplit
from tests.runtime.memory.tracking import LiveBytes, ShapeGroup, flash_core

MODEL = ModelSpec("memory", 4, 128, 8, 2, 352, 1024)
LENGTHS = (48, 80)
DTYPES = [torch.float32, torch.bfloat16]
SCHEMES = [Scheme(1, 1, 2), Scheme(1, 2, 2), Scheme(2, 1, 2), Scheme(1, 2, 2, sp=True), Scheme(1, 4, 4),
           Scheme(1, 1, 2, recompute=Recompute.SELECTIVE), Scheme(1, 1, 2, recompute=Recompute.FULL),
           Scheme(1, 2, 4, sp=True, recompute=Recompute.FULL)]
PEAK_SCHEMES = [Scheme(2, 1, 2), Scheme(1, 2, 2, sp=True), Scheme(1, 1, 2, recompute=Recompute.SELECTIVE),
                Scheme(1, 2, 4, recompute=Recompute.FULL)]


class Neighbours:
    """Both neighbouring stages: they send random activations and gradients, receive nothing."""

    def __init__(self, model: StageModel, batch: PackedMicroBatch) -> None:
        self.model, self.shape = model, (batch.hidden_rows, MODEL.hidden)
        self.dtype = next(model.parameters()).dtype

    def recv_forward(self, shape=None):
        return None if self.model.first else torch.randn(self.shape, dtype=self.dtype)

    def recv_backward(self, shape=None):
        return None if self.model.last else torch.randn(self.shape, dtype=self.dtype)

    def send_forward(self, tensor):
        pass

    send_backward = send_forward

    def send_forward_recv_backward(self, tensor, shape=None):
        return self.recv_backward()

    def send_backward_recv_forward(self, tensor, shape=None):
        return self.recv_forward()


def stage(scheme: Scheme, index: int, dtype: torch.dtype) -> tuple[StageModel, PackedMicroBatch]:
    """Stage ``index`` of ``scheme`` (layers split evenly), its gradients allocated, and the
    micro-batch of :data:`LENGTHS` packed for its cp rank 0."""
    tp, cp = ShapeGroup(None, scheme.tp, 0), ShapeGroup(None, scheme.cp, 0)
    layout = PipelineSplit(scheme, (MODEL.layers // scheme.pp,) * scheme.pp)
    model = StageModel(MODEL, layout, index, tp, cp, dtype, torch.device("cpu"))
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(torch.randn(param.shape, generator=generator) * 0.02)
            param.grad = torch.zeros_like(param)
    documents = [np.arange(s + 1) % MODEL.vocab for s in LENGTHS]
    batch = pack_micro_batch(documents, MicroBatch(tuple(range(len(LENGTHS))), LENGTHS), 1, cp, torch.device("cpu"),
                             sequence_shards=scheme.tp if scheme.sp else 1)
    return model, batch


def kept(model: StageModel, batch: PackedMicroBatch) -> int:
    """Bytes a micro-batch's forward leaves allocated (StageWork keeps its input and output)."""
    work = StageWork(model, lambda j: batch, [batch.hidden_rows], batch.tokens)
    with LiveBytes() as live:
        work.forward(0, Neighbours(model, batch).recv_forward())
        return live.live


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("scheme", SCHEMES, ids=str)
def test_what_a_micro_batch_keeps(scheme, dtype):
    widths, dtype_bytes = Widths.of(MODEL, scheme), torch.finfo(dtype).bits // 8
    with flash_core():
        for index in range(scheme.pp):
            model, batch = stage(scheme, index, dtype)
            layers = (scheme.recompute,) * len(model.layers)
            accounted = micro_batch_bytes_per_token(widths, layers, model.first, model.last, dtype_bytes) * batch.tokens
            assert kept(model, batch) == pytest.approx(accounted, rel=0.01), index


@pytest.mark.parametrize("scheme", PEAK_SCHEMES, ids=str)
def test_the_peak_of_a_stage_under_1f1b(scheme, dtype=torch.bfloat16):
    with flash_core():
        for index in range(scheme.pp):
            model, batch = stage(scheme, index, dtype)
            micro_batches = scheme.pp
            work = StageWork(model, lambda j: batch, [batch.hidden_rows] * micro_batches, batch.tokens * micro_batches)
            with LiveBytes() as live:
                run_1f1b(work, Neighbours(model, batch), micro_batches, scheme.pp, index)
            layers = (scheme.recompute,) * len(model.layers)
            accounted = stage_activation_bytes(MODEL, scheme, layers, index, batch.tokens * scheme.cp,
                                               torch.finfo(dtype).bits // 8)
            assert live.peak == pytest.approx(accounted, rel=0.1), index


def test_layers_that_recompute_differently_add_up():
    scheme = Scheme(1, 2, 1)
    mixed = {0: Recompute.FULL, 1: Recompute.NONE, 2: Recompute.SELECTIVE, 3: Recompute.FULL}
    with flash_core(), mock.patch.object(decoder, "layer_recompute", lambda layout, index: mixed):
        model, batch = stage(scheme, 0, torch.bfloat16)
        accounted = micro_batch_bytes_per_token(Widths.of(MODEL, scheme), tuple(mixed.values()), True, True, 2)
        assert kept(model, batch) == pytest.approx(accounted * batch.tokens, rel=0.01)

"""The activation accounting against an independent count: a real forward and backward of the
runtime's stage model on the ``meta`` device, along its CUDA path (bf16, FlashAttention's
``varlen_attn``, fp32 main gradients), every storage counted from its creation to its release
in the CUDA caching allocator's 512-byte blocks (:class:`~tests.runtime.memory.tracking.MetaLiveBytes`).
The step's peak above the states equals ``stage_activation_bytes`` within 1 %, with the loss all
at once and in chunks, with and without recomputation, at the sizes of the GPU check."""

import numpy as np
import pytest
import torch

from hydraulis.base.presets import model_preset
from hydraulis.base.types import MicroBatch, TimeCoefficients
from hydraulis.job.strategy_spec import parse_strategy
from hydraulis.runtime.gradients import GradientBuffers
from hydraulis.runtime.model.attention import KernelKind, _varlen_kernel
from hydraulis.runtime.model.decoder import StageModel, layer_recompute
from hydraulis.runtime.model.loss import part_loss
from hydraulis.runtime.model.packing import pack_micro_batch
from hydraulis.runtime.parallel.group import ParallelGroup
from hydraulis.sharding.activations import stage_activation_bytes
from tests.runtime.memory.tracking import MetaLiveBytes

META = torch.device("meta")
TOKENS = 4096
CASES = [("tiny", "1,1,1", 0), ("tiny", "1,1,1", 1024), ("llama-1b", "1,1,1", 0), ("llama-1b", "1,1,1", 1024),
         ("llama-1b", "1,1,1[recompute=full]", 1024), ("llama-7b", "1,1,1[recompute=full]", 0)]

pytestmark = pytest.mark.skipif(_varlen_kernel() is None, reason="this torch has no varlen_attn with enable_gqa")


@pytest.mark.parametrize("name, spec, chunk", CASES)
def test_a_step_on_the_meta_device_peaks_at_the_accounted_activations(name, spec, chunk):
    model = model_preset(name)
    pipeline = parse_strategy(spec, model, lambda scheme: TimeCoefficients(0.0, 0.0, 0.0), 1).pipelines[0]
    single = ParallelGroup.single()
    stage = StageModel(model, pipeline, 0, single, single, torch.bfloat16, META, loss_chunk=chunk)
    params = list(stage.parameters())
    gradients = GradientBuffers(params, fp32_main=True)
    gradients.main = [torch.zeros(p.shape, dtype=torch.float32, device=META) for p in params]
    lengths = (TOKENS // 4,) * 4
    documents = [np.zeros(n + 1, dtype=np.int64) for n in lengths]
    batch = pack_micro_batch(documents, MicroBatch(tuple(range(4)), lengths), 1, single, META, KernelKind.VARLEN)
    with MetaLiveBytes() as live:
        part_loss(stage(None, batch), TOKENS).backward()
    layers = tuple(layer_recompute(pipeline, 0).values())
    accounted = stage_activation_bytes(model, pipeline.scheme, layers, 0, TOKENS, 2, chunk)
    assert live.peak == pytest.approx(accounted, rel=0.01)

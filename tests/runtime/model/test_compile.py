"""``--compile``: each decoder layer compiled by ``torch.compile`` computes what the eager layers
do — loss and gradients — on micro-batches of several sizes (one dynamic graph), the attention
core left to the eager kernels."""

import pytest
import torch

from hydraulis.base.presets import model_preset
from hydraulis.base.types import MicroBatch, Recompute, Scheme
from hydraulis.runtime.data import SyntheticCorpus
from hydraulis.runtime.model.decoder import StageModel
from hydraulis.runtime.model.loss import part_loss
from hydraulis.runtime.model.packing import pack_micro_batch
from hydraulis.runtime.optimizer.master import initial_weights
from hydraulis.runtime.parallel.group import ParallelGroup
from hydraulis.sharding.parameters import stage_shards
from hydraulis.sharding.pipeline import PipelineSplit

TINY = model_preset("tiny")
CPU, SINGLE = torch.device("cpu"), ParallelGroup.single()
LENGTHS = ((9, 1, 17, 4), (12, 30), (5, 5, 5, 5, 5, 5))


def _loss_and_grads(compile_layers: bool, scheme: Scheme):
    layout = PipelineSplit(scheme, (TINY.layers,))
    model = StageModel(TINY, layout, 0, SINGLE, SINGLE, torch.float32, CPU, compile_layers)
    full = initial_weights(TINY, 7)
    shards = stage_shards(TINY, layout, 0, 0)
    for param, shard in zip(model.shard_parameters(shards), shards):
        param.data.copy_(full[shard.name])
    losses = []
    for k, lengths in enumerate(LENGTHS):
        corpus = SyntheticCorpus([s + 1 for s in lengths], TINY.vocab, k)
        docs = [corpus[i][:] for i in range(len(lengths))]
        loss = part_loss(model(None, pack_micro_batch(docs, MicroBatch(tuple(range(len(lengths))), lengths), 1,
                                                      SINGLE, CPU)), sum(lengths))
        loss.backward()
        losses.append(loss.item())
    return losses, {name: p.grad.clone() for name, p in model.named_parameters()}


@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(),
                    reason="torch 2.13's CPU inductor generates code that fails on this graph with a fresh cache "
                           "(NameError for a dynamic size symbol); --compile is for CUDA, where gpu_check runs this")
@pytest.mark.parametrize("recompute", [Recompute.NONE, Recompute.FULL])
def test_compiled_layers_compute_what_the_eager_layers_do(recompute):
    scheme = Scheme(1, 1, 1, recompute=recompute)
    torch._dynamo.reset()
    eager_losses, eager = _loss_and_grads(False, scheme)
    compiled_losses, compiled = _loss_and_grads(True, scheme)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1
    assert compiled_losses == pytest.approx(eager_losses, rel=1e-5)
    for name, grad in eager.items():
        assert torch.allclose(compiled[name], grad, rtol=1e-4, atol=1e-6), name

"""The loss in chunks of tokens equals the loss over all logits at once (fp32, CPU, to 1e-6):
the summed loss and the gradients of the rows and of the head, for chunks that do and do not
divide the tokens; the whole stage model's normalised loss (:func:`part_loss`) and every
parameter's gradient; and, on 2 gloo ranks, the vocabulary-parallel head with and without
sequence parallelism."""

import pytest
import torch

from hydraulis.base.presets import model_preset
from hydraulis.base.types import MicroBatch, Scheme
from hydraulis.job.config import RuntimeOptions
from hydraulis.runtime.launch import RankContext, run_job
from hydraulis.runtime.model.decoder import StageModel
from hydraulis.runtime.model.loss import part_loss
from hydraulis.runtime.model.packing import pack_micro_batch
from hydraulis.runtime.model.vocab_loss import VocabLoss
from hydraulis.runtime.optimizer.master import initial_weights
from hydraulis.runtime.parallel.group import ParallelGroup
from hydraulis.runtime.parallel.tensor import (
    IGNORE_INDEX,
    ColumnParallelLinear,
    vocab_parallel_cross_entropy,
)
from hydraulis.sharding.kinds import DeviceKind
from hydraulis.sharding.pipeline import PipelineSplit

TOLERANCE = {"rtol": 1e-6, "atol": 1e-6}
TOKENS, HIDDEN, VOCAB = 13, 8, 12


def _losses(x, weight, labels, group, chunk, sequence_parallel=False, start=0):
    """Summed loss and the gradients of ``x`` and of the head, chunked (``chunk`` > 0) or not."""
    x = x.clone().requires_grad_(True)
    head = ColumnParallelLinear(HIDDEN, weight.shape[0], group, sequence_parallel, dtype=x.dtype)
    with torch.no_grad():
        head.weight.copy_(weight)
    if chunk:
        loss = VocabLoss(head, group, sequence_parallel, start, chunk)(x, labels)
    else:
        loss = vocab_parallel_cross_entropy(head(x), labels, group, start).sum()
    (loss * 0.37).backward()
    return loss.detach(), x.grad, head.weight.grad


def _inputs(generator):
    x = torch.randn(TOKENS, HIDDEN, generator=generator)
    weight = torch.randn(VOCAB, HIDDEN, generator=generator)
    labels = torch.randint(VOCAB, (TOKENS,), generator=generator)
    labels[[2, 5]] = IGNORE_INDEX
    return x, weight, labels


@pytest.mark.parametrize("chunk", [1, 4, 5, TOKENS, 64])
def test_chunked_loss_and_gradients_equal_the_whole_logits(chunk):
    x, weight, labels = _inputs(torch.Generator().manual_seed(chunk))
    single = ParallelGroup.single()
    for got, expected in zip(_losses(x, weight, labels, single, chunk), _losses(x, weight, labels, single, 0)):
        torch.testing.assert_close(got, expected, **TOLERANCE)


def test_a_stage_model_with_the_loss_in_chunks_equals_it_unchunked():
    model = model_preset("tiny")
    layout = PipelineSplit(Scheme(1, 1, 1), (model.layers,))
    single = ParallelGroup.single()
    weights = initial_weights(model, 0)
    lengths = (37, 20, 9)
    generator = torch.Generator().manual_seed(1)
    documents = [torch.randint(model.vocab, (n + 1,), generator=generator) for n in lengths]
    batch = pack_micro_batch(documents, MicroBatch((0, 1, 2), lengths), 1, single, torch.device("cpu"))
    results = []
    for chunk in (0, 16):
        stage = StageModel(model, layout, 0, single, single, torch.float32, torch.device("cpu"), loss_chunk=chunk)
        stage.load_state_dict(weights)
        loss = part_loss(stage(None, batch), sum(lengths))
        loss.backward()
        results.append((loss.detach(), {name: p.grad for name, p in stage.named_parameters()}))
    (chunked, chunked_grads), (whole, whole_grads) = results
    torch.testing.assert_close(chunked, whole, **TOLERANCE)
    for name, grad in whole_grads.items():
        torch.testing.assert_close(chunked_grads[name], grad, **TOLERANCE, msg=name)


def _tensor_parallel_job(context: RankContext) -> None:
    group, rank, size = context.world, context.rank, context.world_size
    x, weight, labels = _inputs(torch.Generator().manual_seed(7))
    x, labels = x[:12], labels[:12]
    share = VOCAB // size
    mine = weight[rank * share:(rank + 1) * share]
    expected = _losses(x, weight, labels, ParallelGroup.single(), 0)
    for sequence_parallel in (False, True):
        rows = slice(rank * 6, (rank + 1) * 6) if sequence_parallel else slice(None)
        for chunk in (0, 5):
            loss, grad_x, grad_w = _losses(x[rows], mine, labels, group, chunk, sequence_parallel, rank * share)
            case = f"rank {rank}, sequence parallel {sequence_parallel}, chunk {chunk}"
            torch.testing.assert_close(loss, expected[0], **TOLERANCE, msg=case)
            torch.testing.assert_close(grad_x, expected[1][rows], **TOLERANCE, msg=case)
            torch.testing.assert_close(grad_w, expected[2][rank * share:(rank + 1) * share], **TOLERANCE, msg=case)


@pytest.mark.distributed
def test_chunked_loss_under_tensor_and_sequence_parallelism_equals_one_process():
    run_job(_tensor_parallel_job, (), RuntimeOptions(device=DeviceKind.CPU), 2)

"""Packed micro-batches: the layout of the tokens, the attention spans, and the acceptance test that a packed
micro-batch gives the loss and gradients of its documents run one by one.

Rotary attention scores depend on position differences only, so that equality cannot see whether
positions restart per document; the positions themselves are checked in the worked example."""

import pytest
import torch

from hydraulis.base.errors import HydraulisError
from hydraulis.base.presets import model_preset
from hydraulis.base.types import MicroBatch, Scheme
from hydraulis.runtime.data import SyntheticCorpus
from hydraulis.runtime.model.decoder import StageModel
from hydraulis.runtime.model.loss import part_loss
from hydraulis.runtime.model.packing import pack_micro_batch
from hydraulis.runtime.optimizer.master import initial_weights
from hydraulis.runtime.parallel.context import context_spans, load_balanced_indices
from hydraulis.runtime.parallel.group import ParallelGroup
from hydraulis.runtime.parallel.tensor import IGNORE_INDEX
from hydraulis.sharding.parameters import stage_shards
from hydraulis.sharding.pipeline import PipelineSplit

TINY = model_preset("tiny")
CPU = torch.device("cpu")
SINGLE = ParallelGroup.single()


def test_worked_example_of_the_packing_docstring():
    docs = [torch.tensor([10, 11, 12, 13]), torch.tensor([20, 21, 22])]
    micro_batch = MicroBatch((0, 1), (3, 2))
    full = [pack_micro_batch(docs, micro_batch, 1, ParallelGroup(None, 2, r), CPU) for r in range(2)]
    assert full[0].input_ids.tolist() == [10, 0, 20, 0]
    assert full[0].labels.tolist() == [11, IGNORE_INDEX, 21, IGNORE_INDEX]
    assert full[0].positions.tolist() == [0, 3, 0, 3]
    assert full[1].input_ids.tolist() == [11, 12, 21, 0]
    assert full[1].cu_seqlens.tolist() == [0, 4, 8]
    spans = context_spans((0, 4, 8), 2, 0)
    assert [(s.query_start, s.queries, s.key_rows.tolist()) for s in spans[:2]] == [(0, 1, [0]), (1, 1, [0, 4, 5, 1])]


def test_load_balanced_chunks_give_every_rank_equal_causal_work():
    cp, bounds = 3, (0, 12, 36)
    work = []
    for rank in range(cp):
        indices = load_balanced_indices(bounds, cp, rank)
        work.append(sum(i - (0 if i < 12 else 12) + 1 for i in indices))
    assert sorted(i for r in range(cp) for i in load_balanced_indices(bounds, cp, r)) == list(range(36))
    assert len(set(work)) == 1


def _loss_and_grads(micro_batches, lengths, docs):
    layout = PipelineSplit(Scheme(1, 1, 1), (TINY.layers,))
    model = StageModel(TINY, layout, 0, SINGLE, SINGLE, torch.float64, CPU)
    full = initial_weights(TINY, 7)
    shards = stage_shards(TINY, layout, 0, 0)
    for param, shard in zip(model.shard_parameters(shards), shards):
        param.data.copy_(full[shard.name])
    total = 0.0
    for micro_batch in micro_batches:
        loss = part_loss(model(None, pack_micro_batch(docs, micro_batch, 1, SINGLE, CPU)), sum(lengths))
        loss.backward()
        total += loss.item()
    return total, {name: p.grad.clone() for name, p in model.named_parameters()}


def test_packed_micro_batch_equals_its_documents_one_by_one():
    lengths = (9, 1, 17, 4, 12)
    corpus = SyntheticCorpus([s + 1 for s in lengths], TINY.vocab, 5)
    docs = [corpus[i][:] for i in range(len(lengths))]
    sequences = tuple(range(len(lengths)))
    packed_loss, packed = _loss_and_grads([MicroBatch(sequences, lengths)], lengths, docs)
    alone_loss, alone = _loss_and_grads([MicroBatch((i,), (lengths[i],)) for i in sequences], lengths, docs)
    assert abs(packed_loss - alone_loss) <= 1e-12
    for name in packed:
        assert torch.allclose(packed[name], alone[name], rtol=1e-10, atol=1e-14), name
    assert packed["layers.3.attn.wq.weight"].abs().max() > 0


def test_a_length_that_disagrees_with_its_document_names_the_micro_batch_entry():
    docs = [torch.arange(5), torch.arange(4)]
    with pytest.raises(HydraulisError, match=r"micro_batch\.lengths\[1\]: 2 disagrees with sequence 1"):
        pack_micro_batch(docs, MicroBatch((0, 1), (4, 2)), 1, SINGLE, CPU)

"""Our decoder equals Hugging Face ``transformers``' ``LlamaForCausalLM``, the independent oracle:
the same weights (mapped by :mod:`hydraulis.runtime.checkpoint.llama_mapping`) give the same logits and
every parameter the same gradient, within 1e-5 relative in fp32 — our packed micro-batch of several
documents against ``transformers`` running each document on its own.

Configs: multi-head, grouped-query and multi-query attention; rotary base 10000 (Llama 2, every
preset) and 500000 (Llama 3); RMSNorm ε 1e-5 and 1e-6. Weights are drawn at random (norms too),
so a transposed, swapped or mis-scaled tensor cannot go unnoticed."""

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from hydraulis.base.types import MicroBatch, ModelSpec, Scheme
from hydraulis.runtime.checkpoint.llama_mapping import hf_config, hf_name, model_from_hf_config
from hydraulis.runtime.model.decoder import StageModel
from hydraulis.runtime.model.packing import pack_micro_batch
from hydraulis.runtime.parallel.group import ParallelGroup
from hydraulis.sharding.pipeline import PipelineSplit

CPU = torch.device("cpu")
TOLERANCE = 1e-5
CONFIGS = {
    "mha": ModelSpec("mha", layers=2, hidden=32, heads=4, kv_heads=4, ffn_hidden=64, vocab=96),
    "gqa": ModelSpec("gqa", layers=3, hidden=48, heads=6, kv_heads=2, ffn_hidden=72, vocab=128, norm_eps=1e-6),
    "mqa-llama3-rope": ModelSpec("mqa", layers=2, hidden=64, heads=4, kv_heads=1, ffn_hidden=96, vocab=80,
                                 rope_theta=500000.0),
}
LENGTHS = (7, 13, 4)
"""The packed micro-batch's documents (padded to multiples of ``ALIGNMENT`` in the pack)."""
ALIGNMENT = 4


def rel(ours: torch.Tensor, theirs: torch.Tensor) -> float:
    return ((ours.double() - theirs.double()).norm() / theirs.double().norm()).item()


def transformers_model(model: ModelSpec) -> LlamaForCausalLM:
    """``transformers``' model of ``model`` (through our config writer), every weight random."""
    config = LlamaConfig(**{k: v for k, v in hf_config(model, "float32").items() if k != "architectures"},
                         attn_implementation="eager")
    torch.manual_seed(0)
    reference = LlamaForCausalLM(config).float()
    with torch.no_grad():
        for name, param in reference.named_parameters():
            param.copy_(1 + 0.1 * torch.randn_like(param) if param.dim() == 1 else 0.05 * torch.randn_like(param))
    return reference


def our_model(model: ModelSpec, reference: LlamaForCausalLM) -> StageModel:
    single = ParallelGroup.single()
    ours = StageModel(model, PipelineSplit(Scheme(1, 1, 1), (model.layers,)), 0, single, single, torch.float32, CPU)
    weights = dict(reference.named_parameters())
    with torch.no_grad():
        for name, param in ours.named_parameters():
            param.copy_(weights[hf_name(name)])
    return ours


def documents(vocab: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return [torch.randint(vocab, (length + 1,), generator=generator) for length in LENGTHS]


def packed_run(ours: StageModel, docs: list[torch.Tensor]) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Our packed forward: each document's logits (captured at the output head) and the loss
    ``Σ ℓ_t / N`` over all documents."""
    batch = pack_micro_batch(docs, MicroBatch(tuple(range(len(docs))), LENGTHS), ALIGNMENT, ParallelGroup.single(),
                             CPU)
    captured = []
    hook = ours.head.register_forward_hook(lambda module, inputs, output: captured.append(output))
    loss = ours(None, batch).sum() / sum(LENGTHS)
    hook.remove()
    starts = batch.cu_seqlens.tolist()
    return [captured[0][start:start + length] for start, length in zip(starts, LENGTHS)], loss


def one_by_one_run(reference: LlamaForCausalLM, docs: list[torch.Tensor]) -> tuple[list[torch.Tensor], torch.Tensor]:
    """``transformers`` on each document alone: its logits, and the same loss."""
    logits = [reference(input_ids=doc[:-1].unsqueeze(0)).logits[0] for doc in docs]
    total = sum(torch.nn.functional.cross_entropy(out, doc[1:], reduction="sum") for out, doc in zip(logits, docs))
    return logits, total / sum(LENGTHS)


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def runs(request):
    model = CONFIGS[request.param]
    reference = transformers_model(model)
    ours = our_model(model, reference)
    docs = documents(model.vocab)
    our_logits, our_loss = packed_run(ours, docs)
    their_logits, their_loss = one_by_one_run(reference, docs)
    our_loss.backward()
    their_loss.backward()
    return ours, reference, our_logits, their_logits, our_loss, their_loss


def test_packed_logits_equal_transformers_document_by_document(runs):
    _, _, our_logits, their_logits, our_loss, their_loss = runs
    for ours, theirs in zip(our_logits, their_logits):
        assert ours.shape == theirs.shape
        assert rel(ours, theirs) <= TOLERANCE
    assert abs(our_loss.item() - their_loss.item()) <= TOLERANCE * their_loss.item()


def test_every_parameter_gradient_equals_transformers(runs):
    ours, reference, *_ = runs
    theirs = dict(reference.named_parameters())
    mapped = {hf_name(name) for name, _ in ours.named_parameters()}
    assert mapped == set(theirs), "the mapping must cover every transformers parameter once"
    for name, param in ours.named_parameters():
        assert rel(param.grad, theirs[hf_name(name)].grad) <= TOLERANCE, name


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_config_round_trips_through_transformers(name, tmp_path):
    model = CONFIGS[name]
    transformers_model(model).config.save_pretrained(tmp_path)
    import json

    document = json.loads((tmp_path / "config.json").read_text())
    assert model_from_hf_config(document, model.name, "config.json") == model

"""Our mixture of experts equals ``transformers``' ``MixtralForCausalLM`` and
``Qwen3MoeForCausalLM``: the same weights (through the checkpoints' per-expert names,
:mod:`hydraulis.runtime.checkpoint.moe_mapping`) give the same logits, the same load-balancing
loss per layer and document and, with the loss ``ℓ + coef·mean_l Σ_d (n_d/N)·aux_l,d``, the same
gradient of every parameter, within 1e-5 relative in fp32 — our packed micro-batch of several documents against
``transformers`` running each document on its own. Weights are random (norms too), the router's
large enough that tokens spread over the experts."""

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModelForCausalLM
from transformers.models.mixtral.modeling_mixtral import load_balancing_loss_func

from hydraulis.base.types import MicroBatch, ModelSpec, Scheme
from hydraulis.runtime.checkpoint.llama_mapping import (
    hf_config,
    hf_name,
    model_from_hf_config,
)
from hydraulis.runtime.model.decoder import StageModel
from hydraulis.runtime.model.packing import pack_micro_batch
from hydraulis.runtime.parallel.group import ParallelGroup
from hydraulis.sharding.pipeline import PipelineSplit

CPU = torch.device("cpu")
TOLERANCE = 1e-5
CONFIGS = {
    "mixtral": ModelSpec("mixtral", layers=2, hidden=32, heads=4, kv_heads=2, ffn_hidden=24, vocab=96,
                         rope_theta=1e6, experts=4, top_k=2, aux_loss_coef=0.02),
    "qwen3-moe": ModelSpec("qwen3", layers=2, hidden=32, heads=4, kv_heads=2, ffn_hidden=16, vocab=80,
                           norm_eps=1e-6, head_dim_override=16, qk_norm=True, experts=6, top_k=3,
                           aux_loss_coef=0.1),
    "qwen3-moe-unnormalised": ModelSpec("qwen3u", layers=1, hidden=32, heads=4, kv_heads=4, ffn_hidden=16, vocab=64,
                                        qk_norm=True, experts=4, top_k=2, normalise_top_k=False, aux_loss_coef=0.1),
}
LENGTHS = (7, 13, 4)
ALIGNMENT = 4


def rel(ours: torch.Tensor, theirs: torch.Tensor) -> float:
    return ((ours.double() - theirs.double()).norm() / theirs.double().norm()).item()


def transformers_model(model: ModelSpec, folder):
    """``transformers``' model of ``model`` through our config writer, every weight random, saved
    to ``folder`` (the checkpoint's per-expert form)."""
    config = AutoConfig.for_model(**hf_config(model, "float32"))
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    reference = AutoModelForCausalLM.from_config(config).float()
    with torch.no_grad():
        for name, param in reference.named_parameters():
            scale = 0.5 if "gate.weight" in name else 0.1
            param.copy_(1 + 0.1 * torch.randn_like(param) if param.dim() == 1 else scale * torch.randn_like(param))
    reference.save_pretrained(folder)
    return reference


def our_model(model: ModelSpec, folder) -> StageModel:
    single = ParallelGroup.single()
    ours = StageModel(model, PipelineSplit(Scheme(1, 1, 1), (model.layers,)), 0, single, single, torch.float32, CPU)
    weights = load_file(str(folder / "model.safetensors"))
    with torch.no_grad():
        for name, param in ours.named_parameters():
            param.copy_(weights.pop(hf_name(name, model)))
    assert not weights, "the mapping must cover every saved tensor once"
    return ours


def their_gradient(reference, model: ModelSpec, name: str) -> torch.Tensor:
    """The gradient of our parameter ``name`` in ``transformers``' fused expert tensors."""
    params = dict(reference.named_parameters())
    if ".moe.experts." not in name:
        theirs = hf_name(name, model).replace("block_sparse_moe.", "mlp.")
        return params[theirs].grad
    layer, expert, matrix = name.split(".")[1], int(name.split(".")[4]), name.split(".")[5]
    prefix = f"model.layers.{layer}.mlp.experts."
    if matrix == "down":
        return params[prefix + "down_proj"].grad[expert]
    gate_up = params[prefix + "gate_up_proj"].grad[expert]
    return gate_up.chunk(2)[0 if matrix == "gate" else 1]


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def runs(request, tmp_path_factory):
    model = CONFIGS[request.param]
    folder = tmp_path_factory.mktemp(request.param)
    reference = transformers_model(model, folder)
    ours = our_model(model, folder)
    generator = torch.Generator().manual_seed(1)
    docs = [torch.randint(model.vocab, (length + 1,), generator=generator) for length in LENGTHS]
    batch = pack_micro_batch(docs, MicroBatch(tuple(range(len(docs))), LENGTHS), ALIGNMENT, ParallelGroup.single(),
                             CPU)
    captured = []
    hook = ours.head.register_forward_hook(lambda module, inputs, output: captured.append(output))
    ours.count_loss_tokens(sum(LENGTHS))
    our_ce = ours(None, batch).sum() / sum(LENGTHS)
    hook.remove()
    mixtures = [layer.moe for layer in ours.layers.values()]
    our_aux = torch.stack([moe.aux for moe in mixtures])
    our_ce.backward()
    outputs = [reference(input_ids=doc[:-1].unsqueeze(0), output_router_logits=True) for doc in docs]
    their_ce = sum(torch.nn.functional.cross_entropy(out.logits[0], doc[1:], reduction="sum")
                   for out, doc in zip(outputs, docs)) / sum(LENGTHS)
    their_aux = torch.stack([sum(length * load_balancing_loss_func((out.router_logits[layer],), model.experts,
                                                                   model.top_k) for out, length in zip(outputs, LENGTHS))
                             / sum(LENGTHS) for layer in range(model.layers)])
    (their_ce + model.aux_loss_coef * their_aux.mean()).backward()
    starts = batch.cu_seqlens.tolist()
    our_logits = [captured[0][start:start + length] for start, length in zip(starts, LENGTHS)]
    return model, ours, reference, our_logits, [out.logits[0] for out in outputs], (our_ce, their_ce), \
        (our_aux, their_aux), mixtures


def test_logits_and_loss_equal_transformers(runs):
    _, _, _, our_logits, their_logits, (our_ce, their_ce), _, _ = runs
    for ours, theirs in zip(our_logits, their_logits):
        assert ours.shape == theirs.shape and rel(ours, theirs) <= TOLERANCE
    assert abs(our_ce.item() - their_ce.item()) <= TOLERANCE * their_ce.item()


def test_load_balancing_loss_per_layer_equals_transformers_and_tokens_add_up(runs):
    model, _, _, _, _, _, (our_aux, their_aux), mixtures = runs
    assert rel(our_aux, their_aux.detach()) <= TOLERANCE
    for moe in mixtures:
        assert int(moe.tokens_per_expert.sum()) == model.top_k * sum(LENGTHS), "padding reaches no expert"
        assert int((moe.tokens_per_expert > 0).sum()) >= 2, "the tokens must spread for the test to bite"


def test_every_gradient_equals_transformers_with_the_auxiliary_loss(runs):
    model, ours, reference, *_ = runs
    for name, param in ours.named_parameters():
        assert rel(param.grad, their_gradient(reference, model, name)) <= TOLERANCE, name


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_config_round_trips_through_transformers(name, tmp_path):
    model = CONFIGS[name]
    transformers_model(model, tmp_path)
    import json
    assert model_from_hf_config(json.loads((tmp_path / "config.json").read_text()), model.name, "config.json") == model


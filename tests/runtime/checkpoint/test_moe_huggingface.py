"""Hugging Face mixtures of experts in and out: a ``transformers`` ``MixtralForCausalLM`` or
``Qwen3MoeForCausalLM`` survives ``train --init-from … --steps 0`` → ``export`` bit for bit, its
checkpoint's per-expert tensors one to one with ours, under an expert-parallel strategy beside a
dense-layout pipeline."""

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModelForCausalLM

from hydraulis.base.types import ModelSpec
from hydraulis.runtime.checkpoint.llama_mapping import hf_config
from tests.cli.helpers import hydraulis

MODELS = {
    "mixtral": ModelSpec("mixtral", layers=2, hidden=32, heads=4, kv_heads=2, ffn_hidden=16, vocab=64,
                         rope_theta=1e6, experts=4, top_k=2, aux_loss_coef=0.02),
    "qwen3-moe": ModelSpec("qwen3", layers=2, hidden=32, heads=4, kv_heads=2, ffn_hidden=16, vocab=80,
                           head_dim_override=16, qk_norm=True, experts=4, top_k=2, aux_loss_coef=0.001),
}


@pytest.mark.distributed
@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_transformers_mixture_survives_conversion_and_export_bitwise(name, tmp_path):
    torch.manual_seed(0)
    reference = AutoModelForCausalLM.from_config(AutoConfig.for_model(**hf_config(MODELS[name], "float32")))
    with torch.no_grad():
        for param in reference.parameters():
            param.copy_(torch.randn_like(param))
    reference.save_pretrained(tmp_path / "source")
    checkpoint, output = tmp_path / "ckpt", tmp_path / "out"
    converted = hydraulis("train", "--init-from", str(tmp_path / "source"), "--strategy", "1,2,1[sp,ep=2]+1,1,1",
                          "--steps", "0", "--checkpoint-dir", str(checkpoint), "--device", "cpu")
    assert converted.returncode == 0, converted.stderr[-3000:]
    exported = hydraulis("export", str(checkpoint / "step-00000000"), "-o", str(output))
    assert exported.returncode == 0, exported.stderr[-3000:]
    original, ours = load_file(str(tmp_path / "source" / "model.safetensors")), load_file(str(output / "model.safetensors"))
    assert original.keys() == ours.keys() and any(".experts.3." in key for key in ours)
    assert all(torch.equal(original[key], ours[key]) for key in original)
    loaded = AutoModelForCausalLM.from_pretrained(output).state_dict()
    assert all(torch.equal(value, loaded[key]) for key, value in reference.state_dict().items())

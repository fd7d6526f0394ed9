"""Our decoder ⇄ Hugging Face ``transformers``' ``LlamaForCausalLM``: config fields and tensor
names (no torch here: the launching process reads configs before any rank starts).

The details: :func:`hf_name`."""

from __future__ import annotations

from typing import Any

from hydraulis.base.errors import HydraulisError, require
from hydraulis.base.types import ModelSpec
from hydraulis.runtime.checkpoint.moe_mapping import (
    MIXTRAL,
    QWEN3_MOE,
    moe_config,
    moe_fields,
    moe_layer_name,
)

DEFAULT_ROPE_THETA = 10000.0
"""``LlamaConfig``'s default rotary base, when ``config.json`` names none."""

_GLOBAL = {"embed.weight": "model.embed_tokens.weight", "norm.weight": "model.norm.weight",
           "head.weight": "lm_head.weight"}
_LAYER = {"attn_norm.weight": "input_layernorm.weight", "attn.wq.weight": "self_attn.q_proj.weight",
          "attn.wk.weight": "self_attn.k_proj.weight", "attn.wv.weight": "self_attn.v_proj.weight",
          "attn.wo.weight": "self_attn.o_proj.weight", "mlp_norm.weight": "post_attention_layernorm.weight",
          "mlp.gate.weight": "mlp.gate_proj.weight", "mlp.up.weight": "mlp.up_proj.weight",
          "mlp.down.weight": "mlp.down_proj.weight"}
IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)
"""Tensors of older checkpoints that are buffers computed from the config, not weights."""


def hf_name(name: str, model: ModelSpec | None = None) -> str:
    """The Hugging Face name of our parameter ``name`` (table below; of a mixture of experts
    ``model``, :mod:`.moe_mapping`'s).

    Config fields (``config.json`` of a ``LlamaConfig``)::

        ModelSpec    LlamaConfig
        layers       num_hidden_layers
        hidden       hidden_size
        heads        num_attention_heads
        kv_heads     num_key_value_heads          (absent: = num_attention_heads)
        ffn_hidden   intermediate_size
        vocab        vocab_size
        rope_theta   rope_theta                   (transformers ≥ 5: rope_parameters.rope_theta)
        norm_eps     rms_norm_eps

    What our architecture fixes is checked on import: ``model_type`` ``llama``, ``hidden_act``
    ``silu``, no attention or MLP biases, ``head_dim = hidden_size / num_attention_heads``, an
    output head of its own (``tie_word_embeddings`` false) and plain rotary positions (rope type
    ``default``, no scaling).

    Tensor names, ``i`` the layer::

        embed.weight                    model.embed_tokens.weight
        layers.i.attn_norm.weight       model.layers.i.input_layernorm.weight
        layers.i.attn.wq.weight         model.layers.i.self_attn.q_proj.weight
        layers.i.attn.wk.weight         model.layers.i.self_attn.k_proj.weight
        layers.i.attn.wv.weight         model.layers.i.self_attn.v_proj.weight
        layers.i.attn.wo.weight         model.layers.i.self_attn.o_proj.weight
        layers.i.mlp_norm.weight        model.layers.i.post_attention_layernorm.weight
        layers.i.mlp.gate.weight        model.layers.i.mlp.gate_proj.weight
        layers.i.mlp.up.weight          model.layers.i.mlp.up_proj.weight
        layers.i.mlp.down.weight        model.layers.i.mlp.down_proj.weight
        norm.weight                     model.norm.weight
        head.weight                     lm_head.weight

    Every tensor maps one to one, unchanged: both sides store ``[out, in]`` matrices and rotate
    queries and keys in the rotate-half form on the same row order (Hugging Face's Llama
    checkpoints were permuted from Meta's interleaved form once, when they were converted).
    """
    if name in _GLOBAL:
        return _GLOBAL[name]
    _, layer, suffix = name.split(".", 2)
    theirs = moe_layer_name(suffix, model) if model is not None and (model.is_moe or model.qk_norm) else None
    return f"model.layers.{layer}.{theirs or _LAYER[suffix]}"


def model_from_hf_config(config: dict[str, Any], name: str, where: str) -> ModelSpec:
    """The :class:`ModelSpec` of a ``LlamaForCausalLM`` config (``where`` names the file in errors)."""

    def field(key: str, default: Any = None) -> Any:
        value = config.get(key, default)
        require(value is not None, f"{where}: {key}", None, "is missing")
        return value

    def expect(key: str, expected: Any, default: Any, why: str) -> None:
        value = config.get(key, default)
        require(value == expected, f"{where}: {key}", value, f"must be {expected!r} ({why})")

    require(isinstance(config, dict), where, type(config).__name__, "must hold a JSON object (a LlamaConfig)")
    kind = config.get("model_type")
    require(kind in ("llama", MIXTRAL, QWEN3_MOE), f"{where}: model_type", kind,
            "must be 'llama', 'mixtral' or 'qwen3_moe'; other architectures are not supported")
    expect("hidden_act", "silu", "silu", "the SwiGLU MLP of Llama")
    expect("attention_bias", False, False, "Llama's projections have no bias")
    expect("mlp_bias", False, False, "Llama's projections have no bias")
    expect("tie_word_embeddings", False, False, "our output head is a matrix of its own")
    heads = field("num_attention_heads")
    hidden = field("hidden_size")
    moe = moe_fields(config, kind, where) if kind != "llama" else {"ffn_hidden": field("intermediate_size")}
    spec = _build(where, name=name, layers=field("num_hidden_layers"), hidden=hidden, heads=heads,
                  kv_heads=config.get("num_key_value_heads") or heads, vocab=field("vocab_size"),
                  rope_theta=_rope_theta(config, where), norm_eps=field("rms_norm_eps"), **moe)
    head_dim = config.get("head_dim")
    require(head_dim in (None, spec.head_dim), f"{where}: head_dim", head_dim,
            f"must be hidden_size / num_attention_heads = {spec.head_dim}")
    return spec


def hf_config(model: ModelSpec, dtype: str) -> dict[str, Any]:
    """A ``config.json`` that ``transformers`` (4.x and 5.x) loads as ``model``'s
    ``LlamaForCausalLM`` (a mixture of experts: ``MixtralForCausalLM`` or ``Qwen3MoeForCausalLM``,
    :mod:`.moe_mapping`); ``dtype`` is the weights' (``float32``, ``bfloat16``, ``float16``)."""
    llama = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "num_hidden_layers": model.layers,
        "hidden_size": model.hidden,
        "num_attention_heads": model.heads,
        "num_key_value_heads": model.kv_heads,
        "head_dim": model.head_dim,
        "intermediate_size": model.ffn_hidden,
        "vocab_size": model.vocab,
        "rope_theta": model.rope_theta,
        "rope_scaling": None,
        "rms_norm_eps": model.norm_eps,
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": False,
        "torch_dtype": dtype,
    }
    return {**llama, **moe_config(model)} if model.is_moe else llama


def _rope_theta(config: dict[str, Any], where: str) -> float:
    """``rope_parameters`` (transformers ≥ 5) or ``rope_theta`` and ``rope_scaling`` (4.x)."""
    parameters = config.get("rope_parameters") or config.get("rope_scaling") or {}
    key = "rope_parameters" if "rope_parameters" in config else "rope_scaling"
    require(isinstance(parameters, dict), f"{where}: {key}", parameters, "must be a JSON object")
    kind = parameters.get("rope_type", parameters.get("type", "default"))
    require(kind == "default", f"{where}: {key}.rope_type", kind,
            "must be 'default' (plain rotary positions; scaled rope is not supported)")
    return parameters.get("rope_theta", config.get("rope_theta", DEFAULT_ROPE_THETA))


def _build(where: str, **fields: Any) -> ModelSpec:
    """``ModelSpec(**fields)``, its errors naming the config field instead of ours."""
    try:
        return ModelSpec(**fields)
    except HydraulisError as error:
        problem = error.problem
        for ours, theirs in _CONFIG_FIELDS.items():
            problem = problem.replace(f"model.{ours} ", f"{theirs} ")
        ours = error.field.removeprefix("model.")
        raise HydraulisError(f"{where}: {_CONFIG_FIELDS.get(ours, ours)}", error.value, problem) from None


_CONFIG_FIELDS = {"layers": "num_hidden_layers", "hidden": "hidden_size", "heads": "num_attention_heads",
                  "kv_heads": "num_key_value_heads", "ffn_hidden": "intermediate_size", "vocab": "vocab_size",
                  "rope_theta": "rope_theta", "norm_eps": "rms_norm_eps"}

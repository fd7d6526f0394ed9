"""Our mixture of experts ⇄ Hugging Face ``transformers``' ``MixtralForCausalLM`` and
``Qwen3MoeForCausalLM``: config fields and tensor names (no torch here). Attention, norms,
embedding and head are named as Llama's (:mod:`.llama_mapping`); the family follows from the
model: q/k norms make a Qwen3-MoE (``qwen3_moe``), none a Mixtral (``mixtral``).

Config fields beyond Llama's::

    ModelSpec         MixtralConfig                  Qwen3MoeConfig
    ffn_hidden        intermediate_size              moe_intermediate_size
    experts           num_local_experts              num_experts (transformers 5 writes num_local_experts)
    top_k             num_experts_per_tok            num_experts_per_tok
    normalise_top_k   (always)                       norm_topk_prob
    aux_loss_coef     router_aux_loss_coef           router_aux_loss_coef
    head_dim_override head_dim (when not H/heads)    head_dim
    qk_norm           (none)                         (always)

Tensor names (each under ``model.layers.i.``): :func:`moe_layer_name`. Every tensor maps one to
one, unchanged. Shared experts (DeepSeekMoE) have no mapping here. Qwen3-MoE's dense layers (``mlp_only_layers``,
``decoder_sparse_step`` > 1) and sliding windows are refused on import.
"""

from __future__ import annotations

from typing import Any

from hydraulis.base.errors import require
from hydraulis.base.types import ModelSpec

MIXTRAL, QWEN3_MOE = "mixtral", "qwen3_moe"
ARCHITECTURES = {MIXTRAL: "MixtralForCausalLM", QWEN3_MOE: "Qwen3MoeForCausalLM"}
_EXPERT = {MIXTRAL: {"gate": "w1", "up": "w3", "down": "w2"},
           QWEN3_MOE: {"gate": "gate_proj", "up": "up_proj", "down": "down_proj"}}
_BLOCK = {MIXTRAL: "block_sparse_moe", QWEN3_MOE: "mlp"}


def family(model: ModelSpec) -> str:
    """``qwen3_moe`` for a mixture with q/k norms, else ``mixtral``."""
    return QWEN3_MOE if model.qk_norm else MIXTRAL


def moe_layer_name(suffix: str, model: ModelSpec) -> str | None:
    """The Hugging Face name (after ``model.layers.i.``) of a layer parameter that only a mixture
    has, or None for one named as Llama's.

    Tensor names in the checkpoints' per-expert form, ``i`` the layer, ``j`` the expert::

        layers.i.moe.router.weight            block_sparse_moe.gate.weight        mlp.gate.weight
        layers.i.moe.experts.j.gate.weight    block_sparse_moe.experts.j.w1.weight  mlp.experts.j.gate_proj.weight
        layers.i.moe.experts.j.up.weight      block_sparse_moe.experts.j.w3.weight  mlp.experts.j.up_proj.weight
        layers.i.moe.experts.j.down.weight    block_sparse_moe.experts.j.w2.weight  mlp.experts.j.down_proj.weight
        layers.i.attn.q_norm.weight           (none)                                self_attn.q_norm.weight
    """
    kind = family(model)
    if suffix.startswith("attn.") and suffix.endswith("_norm.weight"):
        return f"self_attn.{suffix.removeprefix('attn.')}"
    if suffix == "moe.router.weight":
        return f"{_BLOCK[kind]}.gate.weight"
    if suffix.startswith("moe.experts."):
        _, _, expert, matrix, _ = suffix.split(".")
        return f"{_BLOCK[kind]}.experts.{expert}.{_EXPERT[kind][matrix]}.weight"
    require(not suffix.startswith("moe."), "model.shared_experts", model.shared_experts,
            "has no Hugging Face mapping (Mixtral and Qwen3-MoE have no shared experts)")
    return None


def moe_fields(config: dict[str, Any], kind: str, where: str) -> dict[str, Any]:
    """Our fields of a ``MixtralConfig`` / ``Qwen3MoeConfig`` beyond Llama's."""

    def field(key: str) -> Any:
        value = config.get(key)
        require(value is not None, f"{where}: {key}", None, "is missing")
        return value

    hidden, heads = field("hidden_size"), field("num_attention_heads")
    head_dim = config.get("head_dim") or hidden // heads
    windowed = config.get("use_sliding_window", False) if kind == QWEN3_MOE else config.get("sliding_window") is not None
    require(not windowed, f"{where}: sliding_window", config.get("sliding_window"),
            "must be off (attention over whole documents)")
    if kind == QWEN3_MOE:
        require(not config.get("mlp_only_layers") and config.get("decoder_sparse_step", 1) == 1,
                f"{where}: mlp_only_layers", config.get("mlp_only_layers"), "must be empty: every layer a mixture")
    return {"ffn_hidden": field("intermediate_size" if kind == MIXTRAL else "moe_intermediate_size"),
            "experts": config.get("num_experts") or field("num_local_experts"),
            "top_k": field("num_experts_per_tok"),
            "normalise_top_k": True if kind == MIXTRAL else bool(config.get("norm_topk_prob", False)),
            "aux_loss_coef": float(config.get("router_aux_loss_coef", 0.0)),
            "head_dim_override": 0 if head_dim * heads == hidden else head_dim,
            "qk_norm": kind == QWEN3_MOE}


def moe_config(model: ModelSpec) -> dict[str, Any]:
    """The fields of ``model``'s ``MixtralConfig`` / ``Qwen3MoeConfig`` beyond Llama's."""
    kind = family(model)
    require(kind == QWEN3_MOE or model.normalise_top_k, "model.normalise_top_k", False,
            "must be true for Mixtral (it always normalises)")
    require(model.shared_experts == 0, "model.shared_experts", model.shared_experts,
            "has no Hugging Face mapping (Mixtral and Qwen3-MoE have no shared experts)")
    width = "intermediate_size" if kind == MIXTRAL else "moe_intermediate_size"
    fields = {"architectures": [ARCHITECTURES[kind]], "model_type": kind, width: model.ffn_hidden,
              "num_experts_per_tok": model.top_k, "router_aux_loss_coef": model.aux_loss_coef,
              "output_router_logits": False, "sliding_window": None}
    if kind == MIXTRAL:
        return {**fields, "num_local_experts": model.experts, "router_jitter_noise": 0.0}
    return {**fields, "num_experts": model.experts, "norm_topk_prob": model.normalise_top_k,
            "decoder_sparse_step": 1, "mlp_only_layers": [], "use_sliding_window": False,
            "intermediate_size": model.ffn_hidden}

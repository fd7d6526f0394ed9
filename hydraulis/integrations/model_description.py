"""A model's shape from the description its runtime keeps, and the device preset of a GPU.

Recognised descriptions (a JSON object, or a config object's attributes)::

    ModelSpec    Hugging Face config.json   Megatron TransformerConfig   torchtitan ModelArgs
    layers       num_hidden_layers          num_layers                   n_layers
    hidden       hidden_size                hidden_size                  dim
    heads        num_attention_heads        num_attention_heads          n_heads
    kv_heads     num_key_value_heads        num_query_groups             n_kv_heads
    ffn_hidden   intermediate_size          ffn_hidden_size (4h)         Llama's rule from dim
    vocab        vocab_size                 padded_vocab_size/vocab_size vocab_size

A non-gated MLP of width ``F`` has the FLOPs of a gated one of ``2F/3`` (two ``h×F`` matrices
against three ``h×f``), so Megatron's ``gated_linear_unit = False`` maps to ``ffn_hidden = 2F/3``
(to a multiple of 64, so tensor parallelism shards it).
Planning only needs the shapes: the analytic cost prices any such decoder as a Llama one.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from hydraulis.base.errors import HydraulisError, require
from hydraulis.base.presets import device_names, device_preset
from hydraulis.base.types import DeviceSpec, ModelSpec

log = logging.getLogger(__name__)

MEGATRON_VOCAB = 32_000
"""Vocabulary assumed for a ``TransformerConfig``, which does not state one (the balance of a
step hardly depends on it: it only adds the same per-token head cost to every sample)."""


def model_from_description(description: Mapping[str, Any], name: str, where: str = "model") -> ModelSpec:
    """The :class:`ModelSpec` of a description of the module docstring's table."""
    require(isinstance(description, Mapping), where, type(description).__name__, "must be a JSON object")
    d = {k: v for k, v in description.items() if v is not None}
    if "num_hidden_layers" in d:
        return _spec(where, name, d, "num_hidden_layers", "hidden_size", "num_attention_heads",
                     "num_key_value_heads", d.get("intermediate_size"), d.get("vocab_size"))
    if "num_layers" in d and "hidden_size" in d:
        ffn = d.get("ffn_hidden_size", 4 * _int(d, "hidden_size", where))
        ffn = ffn if d.get("gated_linear_unit", True) else 64 * round(2 * ffn / 3 / 64)
        vocab = d.get("padded_vocab_size", d.get("vocab_size"))
        if vocab is None:
            log.info("%s: no vocab_size, assuming %d for planning", where, MEGATRON_VOCAB)
            vocab = MEGATRON_VOCAB
        return _spec(where, name, d, "num_layers", "hidden_size", "num_attention_heads", "num_query_groups", ffn, vocab)
    if "n_layers" in d and "dim" in d:
        return _spec(where, name, d, "n_layers", "dim", "n_heads", "n_kv_heads", _llama_ffn(d, where),
                     d.get("vocab_size"))
    raise HydraulisError(where, sorted(d)[:8], "is not a model description: give a Hugging Face config.json "
                                               "(num_hidden_layers), Megatron's TransformerConfig (num_layers, "
                                               "hidden_size) or torchtitan's ModelArgs (n_layers, dim)")


def description_of(config: Any) -> dict[str, Any]:
    """A config object's public attributes (Megatron's ``TransformerConfig``, a dataclass)."""
    if isinstance(config, Mapping):
        return dict(config)
    return {k: v for k, v in vars(config).items() if not k.startswith("_")}


def device_matching(gpu_name: str, memory_bytes: int | None = None) -> DeviceSpec:
    """The preset of a GPU named as ``torch.cuda.get_device_name`` does ("NVIDIA H100 80GB HBM3"):
    a preset whose family (``h100``) the name contains, the nearest in memory."""
    words = gpu_name.lower().replace("-", " ").split()
    found = [device_preset(n) for n in device_names() if n.split("-")[0] in words]
    require(bool(found), "device", gpu_name,
            f"matches no device preset ({', '.join(device_names())}): pass device= a preset name")
    return min(found, key=lambda d: abs(d.memory_bytes - (memory_bytes or d.memory_bytes)))


def _spec(where: str, name: str, d: dict[str, Any], layers: str, hidden: str, heads: str, kv_heads: str,
          ffn: Any, vocab: Any) -> ModelSpec:
    require(ffn is not None, f"{where}: ffn", None, "is missing (intermediate_size)")
    require(vocab is not None, f"{where}: vocab_size", None, "is missing")
    h = _int(d, heads, where)
    return ModelSpec(name=name, layers=_int(d, layers, where), hidden=_int(d, hidden, where), heads=h,
                     kv_heads=int(d.get(kv_heads, h)), ffn_hidden=int(ffn), vocab=int(vocab),
                     rope_theta=float(d.get("rope_theta", 10000.0)),
                     norm_eps=float(d.get("rms_norm_eps", d.get("norm_eps", d.get("layernorm_epsilon", 1e-5)))))


def _int(d: dict[str, Any], key: str, where: str) -> int:
    value = d.get(key)
    require(isinstance(value, int) and not isinstance(value, bool), f"{where}: {key}", value, "must be an integer")
    return value


def _llama_ffn(d: dict[str, Any], where: str) -> int:
    """Llama's MLP width: ``⌈m·(2·4·dim/3)/multiple⌉·multiple``, ``m`` the ffn_dim_multiplier."""
    width = int(2 * 4 * _int(d, "dim", where) / 3)
    if d.get("ffn_dim_multiplier") is not None:
        width = int(float(d["ffn_dim_multiplier"]) * width)
    multiple = int(d.get("multiple_of", 256))
    return multiple * ((width + multiple - 1) // multiple)

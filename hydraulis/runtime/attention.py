"""Causal attention over packed documents: a token attends to the earlier tokens of its own
document and to nothing else.

A packed micro-batch concatenates documents; ``cu_seqlens = (0, s₁, s₁+s₂, …)`` marks their
starts. Each token carries its document index ``d`` and its position ``p`` inside that document
(positions restart at 0 for every document, and rotary embeddings use them). Query ``i`` may see
key ``j`` iff

    d_j = d_i   and   p_j ≤ p_i                                   (block-diagonal causal mask)

which is the plain causal mask inside each document and zero across documents. Under context
parallelism the keys are the gathered tokens of all cp ranks, in any order: the rule only reads
``(d, p)``. Cost ``O(Σ s_i²)`` useful work; the mask itself is ``T_q × T_k`` booleans.

Kernels: ``scaled_dot_product_attention`` with that mask everywhere (any device and dtype;
each kv head repeated for its ``H_q/H_kv`` query heads); on CUDA with fp16/bf16 and whole documents (cp = 1)
the variable-length FlashAttention kernel ``torch.nn.attention.varlen.varlen_attn`` from
``cu_seqlens`` when this torch has it — no mask, no cross-document work.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import lru_cache

import torch
import torch.nn.functional as F

FLASH_DTYPES = (torch.float16, torch.bfloat16)


def document_causal_mask(query_docs: torch.Tensor, query_positions: torch.Tensor,
                         key_docs: torch.Tensor, key_positions: torch.Tensor) -> torch.Tensor:
    """``mask[i, j] = (d_j = d_i) ∧ (p_j ≤ p_i)`` (True: may attend)."""
    same = query_docs.unsqueeze(1) == key_docs.unsqueeze(0)
    return same & (key_positions.unsqueeze(0) <= query_positions.unsqueeze(1))


def use_varlen_kernel(device: torch.device, dtype: torch.dtype, cp: int) -> bool:
    """Whether :func:`packed_attention` runs the FlashAttention varlen kernel (imported only
    when it could run: importing it loads ``torch._dynamo``, seconds of start-up)."""
    return device.type == "cuda" and dtype in FLASH_DTYPES and cp == 1 and _varlen_kernel() is not None


@lru_cache(maxsize=1)
def _varlen_kernel() -> Callable | None:
    """``varlen_attn`` when this torch has it with causal windows and grouped-query attention."""
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        return None
    parameters = inspect.signature(varlen_attn).parameters
    return varlen_attn if {"window_size", "enable_gqa"} <= parameters.keys() else None


def packed_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                     cu_seqlens: torch.Tensor | None = None, max_seqlen: int = 0) -> torch.Tensor:
    """``q: [T_q, H_q, d]``, ``k, v: [T_k, H_kv, d]`` → ``[T_q, H_q·d]``. With ``mask`` None the
    varlen kernel runs over documents ``cu_seqlens`` (int32, queries = keys)."""
    tokens, heads, dim = q.shape
    if mask is None:
        out = _varlen_kernel()(q, k, v, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen,
                               window_size=(-1, 0), enable_gqa=k.shape[1] != heads)
        return out.reshape(tokens, heads * dim)
    group = heads // k.shape[1]
    k, v = (t.repeat_interleave(group, dim=1) if group > 1 else t for t in (k, v))
    out = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), attn_mask=mask)
    return out.transpose(0, 1).reshape(tokens, heads * dim)

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

Kernels: ``scaled_dot_product_attention`` with that mask everywhere (any device and dtype,
grouped-query attention via ``enable_gqa``); on CUDA with fp16/bf16 and whole documents (cp = 1)
the variable-length FlashAttention kernel ``torch.nn.attention.varlen.varlen_attn`` from
``cu_seqlens`` when this torch has it — no mask, no cross-document work.
"""

from __future__ import annotations

from importlib.util import find_spec

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
    then: importing it loads ``torch._dynamo``, seconds of start-up)."""
    return device.type == "cuda" and dtype in FLASH_DTYPES and cp == 1 and find_spec("torch.nn.attention.varlen") is not None


def packed_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                     cu_seqlens: torch.Tensor | None = None, max_seqlen: int = 0) -> torch.Tensor:
    """``q: [T_q, H_q, d]``, ``k, v: [T_k, H_kv, d]`` → ``[T_q, H_q·d]``. With ``mask`` None the
    varlen kernel runs over documents ``cu_seqlens`` (int32, queries = keys)."""
    tokens, heads, dim = q.shape
    if mask is None:
        from torch.nn.attention.varlen import varlen_attn

        out = varlen_attn(q, k, v, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen,
                          window_size=(-1, 0), enable_gqa=k.shape[1] != heads)
        return out.reshape(tokens, heads * dim)
    out = F.scaled_dot_product_attention(q.transpose(0, 1).unsqueeze(0), k.transpose(0, 1).unsqueeze(0),
                                         v.transpose(0, 1).unsqueeze(0), attn_mask=mask,
                                         enable_gqa=k.shape[1] != heads)
    return out.squeeze(0).transpose(0, 1).reshape(tokens, heads * dim)

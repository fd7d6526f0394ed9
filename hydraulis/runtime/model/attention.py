"""Causal attention over packed documents: a token attends to the earlier tokens of its own
document and to nothing else.

A packed micro-batch concatenates documents; ``cu_seqlens = (0, s₁, s₁+s₂, …)`` marks their
starts. Each token carries its document index ``d`` and its position ``p`` inside that document
(positions restart at 0 for every document, and rotary embeddings use them). Query ``i`` may see
key ``j`` iff

    d_j = d_i   and   p_j ≤ p_i                                   (block-diagonal causal mask)

which is the plain causal mask inside each document and zero across documents. Under context
parallelism the keys are the gathered tokens of all cp ranks, in any order: the rule only reads
``(d, p)``.

Kernels, both costing ``O(Σ_i s_i²)`` — the ``a·s²`` term of the cost model — never ``O(T²)``
for a micro-batch of ``T`` tokens:

* everywhere: one ``scaled_dot_product_attention`` call per document (:class:`DocumentBlock`):
  its queries against its keys only, ``is_causal`` when the document is whole on this rank
  (cp = 1), else its small ``s/cp × s`` document-causal mask; each kv head repeated once for
  its ``H_q/H_kv`` query heads. A packed micro-batch of ``n`` documents pays ``n`` kernel calls
  per layer (a per-document overhead, small next to ``a·s²`` unless documents are very short);
* on CUDA with fp16/bf16 and whole documents (cp = 1) the variable-length FlashAttention kernel
  ``torch.nn.attention.varlen.varlen_attn`` from ``cu_seqlens`` when this torch has it — one
  call for all documents.

Worked example: documents of 3 and 2 tokens, cp = 1 → blocks ``rows 0–2`` and ``rows 3–4``,
each causal; 9 + 4 = 13 score entries instead of the 25 of one masked ``5 × 5`` call.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import torch
import torch.nn.functional as F

FLASH_DTYPES = (torch.float16, torch.bfloat16)


@dataclass(frozen=True)
class DocumentBlock:
    """One document's part of a rank's attention: its queries are the rank's rows
    ``[query_start, query_stop)``; its keys the gathered rows ``keys`` (a slice when they are
    contiguous, an index tensor under context parallelism); ``mask`` its document-causal mask
    (None: the plain causal mask of a whole document)."""

    query_start: int
    query_stop: int
    keys: slice | torch.Tensor
    mask: torch.Tensor | None


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


def packed_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, blocks: Sequence[DocumentBlock] | None,
                     cu_seqlens: torch.Tensor | None = None, max_seqlen: int = 0) -> torch.Tensor:
    """``q: [T_q, H_q, d]``, ``k, v: [T_k, H_kv, d]`` → ``[T_q, H_q·d]``, document by document
    (``blocks`` cover the query rows in order). With ``blocks`` None the varlen kernel runs over
    documents ``cu_seqlens`` (int32, queries = keys)."""
    tokens, heads, dim = q.shape
    if blocks is None:
        out = _varlen_kernel()(q, k, v, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen,
                               window_size=(-1, 0), enable_gqa=k.shape[1] != heads)
        return out.reshape(tokens, heads * dim)
    group = heads // k.shape[1]
    q, k, v = (t.transpose(0, 1) for t in (q, k, v))
    if group > 1:
        k, v = k.repeat_interleave(group, dim=0), v.repeat_interleave(group, dim=0)
    outs = [_block_attention(q, k, v, block) for block in blocks]
    return torch.cat(outs, dim=1).transpose(0, 1).reshape(tokens, heads * dim)


def _block_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block: DocumentBlock) -> torch.Tensor:
    """One document, head-major ``[H, s_q, d]``."""
    queries = q[:, block.query_start:block.query_stop]
    if isinstance(block.keys, slice):
        keys, values = k[:, block.keys], v[:, block.keys]
    else:
        keys, values = k.index_select(1, block.keys), v.index_select(1, block.keys)
    if block.mask is None:
        return F.scaled_dot_product_attention(queries, keys, values, is_causal=True)
    return F.scaled_dot_product_attention(queries, keys, values, attn_mask=block.mask)

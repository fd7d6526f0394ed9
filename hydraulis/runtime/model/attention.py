"""Causal attention over packed documents: a token attends to the earlier tokens of its own
document and to nothing else.

A packed micro-batch concatenates documents; ``cu_seqlens = (0, s₁, s₁+s₂, …)`` marks their
starts, and positions restart at 0 in every document (rotary embeddings use them). Query ``i``
may see key ``j`` iff both lie in one document and ``p_j ≤ p_i``. The rows of a rank are cut into
attention **spans** (:mod:`hydraulis.runtime.model.attention_spans`): consecutive queries against
consecutive keys of one document, causal at the bottom right. With a head's scores
``S = Q·Kᵀ/√d`` the output of query ``i`` is::

    O_i = Σ_j softmax_j(S_ij)·V_j,       lse_i = log Σ_j exp(S_ij)         (visible j only)

The details: :func:`packed_attention`."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from typing import Protocol

import torch

from hydraulis.base.errors import HydraulisError
from hydraulis.runtime.model.attention_spans import AttentionPlan, KernelCall, SpanPlan, VarlenPlan

log = logging.getLogger(__name__)

FLASH_DTYPES = (torch.float16, torch.bfloat16)
MATH_BLOCK_ELEMENTS = 1 << 20
"""Largest score block of the math kernel (elements)."""


VARLEN_TORCH = "2.11"
"""The first torch whose ``varlen_attn`` takes causal windows (``window_size``, pytorch#172238);
``enable_gqa`` came in 2.12 (without it the K/V heads are repeated)."""


@dataclass(frozen=True)
class VarlenKernel:
    """``varlen_attn`` and whether it reads grouped K/V heads itself (``enable_gqa``)."""

    call: Callable
    native_gqa: bool


class KernelKind(str, Enum):
    VARLEN = "varlen"
    CPU_FLASH = "cpu_flash"
    MATH = "math"


def attention_kernel(device: torch.device, dtype: torch.dtype, allow_math: bool = False) -> KernelKind:
    """The kernel :func:`packed_attention` runs on ``device`` in ``dtype`` (:func:`packed_attention`).
    On CUDA in fp16/bf16 without ``varlen_attn`` (torch < :data:`VARLEN_TORCH`) it raises,
    naming the version needed — the math kernel is many times slower and keeps fp32 score
    blocks — unless ``allow_math``, which logs a warning naming the cost and runs it."""
    if device.type == "cuda":
        if dtype not in FLASH_DTYPES:
            return KernelKind.MATH
        if _varlen_kernel() is not None:
            return KernelKind.VARLEN
        if not allow_math:
            raise HydraulisError("torch", torch.__version__,
                                 f"has no varlen_attn with causal windows (window_size); CUDA training in {dtype} "
                                 f"needs torch >= {VARLEN_TORCH} (or --allow-math-attention to run the blocked fp32 "
                                 f"math kernel, several times slower)")
        log.warning("torch %s has no varlen_attn: attention runs the blocked fp32 math kernel, several times slower "
                    "than FlashAttention and with fp32 score blocks (torch >= %s has it)", torch.__version__,
                    VARLEN_TORCH)
        return KernelKind.MATH
    return KernelKind.CPU_FLASH if device.type == "cpu" and _cpu_flash_ops() is not None else KernelKind.MATH


def packed_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, plan: AttentionPlan,
                     kernel: KernelKind | None = None) -> torch.Tensor:
    """``q: [T_q, H_q, d]``, ``k, v: [T_k, H_kv, d]`` → ``[T_q, H_q·d]`` over the plan's spans;
    ``kernel`` overrides the dense kernel of a :class:`~.attention_spans.SpanPlan`.

    Work is ``Σ_i s_i²/2`` score entries per head — the ``a·s²`` term of the cost model — never
    ``T²`` for a micro-batch of ``T`` tokens, and nothing of size queries × keys is kept. Grouped-query
    attention reads each kv head for its ``H_q/H_kv`` query heads in place (no copies of K and V,
    but for a varlen kernel without ``enable_gqa``, below).

    Kernels (:func:`attention_kernel`):

    * **varlen** (CUDA, fp16/bf16, ``torch.nn.attention.varlen.varlen_attn``, torch >=
      :data:`VARLEN_TORCH`): one FlashAttention call per micro-batch and layer over every span
      (:class:`~.attention_spans.VarlenPlan`), causal by ``window_size=(-1, 0)`` (bottom-right aligned);
      grouped-query attention by the kernel's ``enable_gqa`` where it has one (torch >= 2.12), else
      each kv head repeated for its ``g = H_q/H_kv`` query heads before the call
      (``2·(g − 1)·T·H_kv·d`` more elements; llama-1b, 4,096 tokens, bf16: ``2·3·4,096·8·64·2 B``
      ≈ 25 MB a layer, kept for its backward);
    * **cpu_flash** (CPU): the spans' parts in batched calls of ATen's CPU FlashAttention kernel
      (:class:`~.attention_spans.SpanPlan`; blocked, it keeps only ``O`` and ``lse``), a handful of calls
      per micro-batch — one per padded size — whatever the number of documents;
    * **math** (any device, e.g. CUDA in fp32 for checks): the same calls computed with matrix
      products, in blocks of queries small enough that no score block exceeds
      :data:`MATH_BLOCK_ELEMENTS`.

    A query row whose span is cut into a diagonal part and a rectangle (context parallelism) gets
    ``O_p, lse_p`` from each part ``p``, merged exactly::

        lse = log Σ_p exp(lse_p),     O = Σ_p exp(lse_p − lse)·O_p

    and the backward of each part is FlashAttention's backward (Dao 2023, Alg. 2) evaluated with the
    *merged* ``O`` and ``lse``: with ``D_i = Σ_d dO_id·O_id``, ``P_p = exp(S_p − lse)`` and
    ``dS_p = P_p ⊙ (dO·V_pᵀ − D)``, the parts' ``dQ = Σ_p dS_p·K_p/√d`` and each part's
    ``dK_p = dS_pᵀ·Q/√d``, ``dV_p = P_pᵀ·dO`` are the gradients of the merged output — the same
    identity ring attention uses. Padded query rows are zero rows with ``dO = 0, O = 0, lse = 0``, so
    they contribute nothing. The backward is linear in the tokens: every gradient is accumulated
    into one buffer per tensor (``index_add``), no per-document slices.

    Worked example: documents of 3 and 2 tokens, cp = 1 → one call of two parts padded to 16 rows;
    the scores computed are those of two causal 16 × 16 blocks, not of one 5 × 5 masked matrix.
    """
    tokens, heads, dim = q.shape
    if isinstance(plan, VarlenPlan):
        if plan.key_index is not None:
            k, v = k.index_select(0, plan.key_index), v.index_select(0, plan.key_index)
        return _varlen(_varlen_kernel(), q, k, v, plan).reshape(tokens, heads * dim)
    dense = _DENSE[kernel or attention_kernel(q.device, q.dtype)]
    return _SegmentAttention.apply(q, k, v, plan, dense).reshape(tokens, heads * dim)


def _varlen(kernel: VarlenKernel, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
            plan: VarlenPlan) -> torch.Tensor:
    """One ``varlen_attn`` call, causal at the bottom right; kv heads repeated ``g`` times
    (query head ``h`` reads kv head ``h // g``) when the kernel cannot group them itself."""
    group = q.shape[1] // k.shape[1]
    grouping = {}
    if kernel.native_gqa:
        grouping = {"enable_gqa": group > 1}
    elif group > 1:
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    return kernel.call(q, k, v, plan.cu_seqlens_q, plan.cu_seqlens_k, plan.max_queries, plan.max_keys,
                       window_size=(-1, 0), **grouping)


class DenseKernel(Protocol):
    """Attention of ``n`` equally sized parts: ``q: [n, H_q, L, d]``, ``k, v: [n, H_kv, S, d]``;
    ``causal`` (square parts) or ``mask: [n, S]`` (True: a real key)."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """``O: [n, H_q, L, d]`` and ``lse: [n, H_q, L]`` (fp32, or wider)."""

    def backward(self, grad: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                 lse: torch.Tensor, causal: bool, mask: torch.Tensor | None) -> tuple[torch.Tensor, ...]:
        """``dQ, dK, dV`` of the part given the merged ``out`` and ``lse``."""


class _SegmentAttention(torch.autograd.Function):
    """The calls of a :class:`~.attention_spans.SpanPlan`, merged by log-sum-exp (:func:`packed_attention`)."""

    @staticmethod
    def forward(ctx, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, plan: SpanPlan,
                kernel: DenseKernel) -> torch.Tensor:
        wide = torch.promote_types(q.dtype, torch.float32)
        heads, dim = q.shape[1:]
        out = q.new_zeros((plan.queries + 1, heads, dim), dtype=wide)
        lse = q.new_full((plan.queries + 1, heads), float("-inf"), dtype=wide)
        rows = _with_zero_row(q), _with_zero_row(k), _with_zero_row(v)
        for call in plan.calls:
            part_out, part_lse = kernel.forward(*_gathered(call, *rows), call.causal, call.key_mask)
            part_out, part_lse = _as_rows(part_out).to(wide), _as_rows(part_lse).to(wide)
            if plan.merged:
                part_out, part_lse = _merge(out[call.query_index], lse[call.query_index], part_out, part_lse)
            out.index_copy_(0, call.query_index, part_out)
            lse.index_copy_(0, call.query_index, part_lse)
        result = out[:-1].to(q.dtype)
        ctx.save_for_backward(q, k, v, result, lse[:-1])
        ctx.plan, ctx.kernel = plan, kernel
        return result

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        q, k, v, out, lse = ctx.saved_tensors
        wide = lse.dtype
        grads = [t.new_zeros((t.shape[0] + 1, *t.shape[1:]), dtype=wide) for t in (q, k, v)]
        rows = _with_zero_row(q), _with_zero_row(k), _with_zero_row(v)
        outputs = _with_zero_row(grad.contiguous()), _with_zero_row(out), _with_zero_row(lse, 0.0)
        for call in ctx.plan.calls:
            part_q, part_k, part_v = _gathered(call, *rows)
            part_grad, part_out, part_lse = (_part(t, call.query_index, call.parts, call.query_length)
                                             for t in outputs)
            dq, dk, dv = ctx.kernel.backward(part_grad, part_q, part_k, part_v, part_out, part_lse.contiguous(),
                                             call.causal, call.key_mask)
            grads[0].index_add_(0, call.query_index, _as_rows(dq).to(wide))
            grads[1].index_add_(0, call.key_index, _as_rows(dk).to(wide))
            grads[2].index_add_(0, call.key_index, _as_rows(dv).to(wide))
        return (*(g[:-1].to(t.dtype) for g, t in zip(grads, (q, k, v))), None, None)


def _with_zero_row(x: torch.Tensor, fill: float = 0.0) -> torch.Tensor:
    """``x`` with one more row of ``fill`` at the end, the target of padded indices."""
    return torch.cat((x, x.new_full((1, *x.shape[1:]), fill)))


def _part(rows: torch.Tensor, index: torch.Tensor, parts: int, length: int) -> torch.Tensor:
    """Rows ``index`` as ``parts`` parts of ``length`` rows, head-major: ``[parts, H, length, …]``."""
    return rows.index_select(0, index).view(parts, length, *rows.shape[1:]).transpose(1, 2)


def _gathered(call: KernelCall, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (_part(q, call.query_index, call.parts, call.query_length),
            _part(k, call.key_index, call.parts, call.key_length),
            _part(v, call.key_index, call.parts, call.key_length))


def _as_rows(x: torch.Tensor) -> torch.Tensor:
    """``[parts, H, length, …]`` back to rows ``[parts·length, H, …]``."""
    x = x.transpose(1, 2)
    return x.reshape(x.shape[0] * x.shape[1], *x.shape[2:])


def _merge(out: torch.Tensor, lse: torch.Tensor, part_out: torch.Tensor,
           part_lse: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(O, lse)`` of rows so far merged with a part's (:func:`packed_attention`); rows without any
    part yet have ``lse = −∞`` and take the part's."""
    merged = torch.logaddexp(lse, part_lse)
    return (out * torch.exp(lse - merged).unsqueeze(-1) + part_out * torch.exp(part_lse - merged).unsqueeze(-1),
            merged)


class _CpuFlash:
    """ATen's CPU FlashAttention kernel and its backward (blocked, grouped-query attention in place)."""

    def forward(self, q, k, v, causal, mask):
        forward, _ = _cpu_flash_ops()
        return forward(q, k, v, 0.0, causal, attn_mask=_additive(mask, q.dtype))

    def backward(self, grad, q, k, v, out, lse, causal, mask):
        _, backward = _cpu_flash_ops()
        return backward(grad, q, k, v, out, lse, 0.0, causal, attn_mask=_additive(mask, q.dtype))


def _additive(mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """A key mask ``[n, S]`` as the additive ``[n, 1, 1, S]`` bias the kernel takes (0 or −∞)."""
    if mask is None:
        return None
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, float("-inf"))[:, None, None]


class _Math:
    """Matrix products in blocks of queries; the grouped query heads of a kv head are folded
    into the query rows (``[n, H_kv, g·b, d]``), so K and V are read in place."""

    def forward(self, q, k, v, causal, mask):
        n, heads, length, dim = q.shape
        kv_heads, wide = k.shape[1], torch.promote_types(q.dtype, torch.float32)
        out = torch.empty_like(q)
        lse = q.new_empty((n, heads, length), dtype=wide)
        for first, last in self._blocks(q, k):
            queries = self._fold(q[:, :, first:last], kv_heads)
            probabilities, block_lse = self._probabilities(queries, k, causal, mask, range(first, last), None)
            block = probabilities @ v.to(wide)
            out[:, :, first:last] = self._unfold(block, heads).to(q.dtype)
            lse[:, :, first:last] = self._unfold(block_lse.unsqueeze(-1), heads).squeeze(-1)
        return out, lse

    def backward(self, grad, q, k, v, out, lse, causal, mask):
        kv_heads, scale = k.shape[1], q.shape[-1] ** -0.5
        wide = lse.dtype
        dq, dk, dv = torch.empty_like(q), torch.zeros_like(k, dtype=wide), torch.zeros_like(v, dtype=wide)
        for first, last in self._blocks(q, k):
            queries, block_grad, block_out = (self._fold(t[:, :, first:last], kv_heads) for t in (q, grad, out))
            block_lse = self._fold(lse[:, :, first:last].unsqueeze(-1), kv_heads).squeeze(-1)
            probabilities, _ = self._probabilities(queries, k, causal, mask, range(first, last), block_lse)
            dv += probabilities.transpose(-1, -2) @ block_grad.to(wide)
            delta = (block_grad.to(wide) * block_out.to(wide)).sum(-1, keepdim=True)
            scores_grad = probabilities * ((block_grad.to(wide) @ v.to(wide).transpose(-1, -2)) - delta) * scale
            dq[:, :, first:last] = self._unfold(scores_grad @ k.to(wide), q.shape[1]).to(q.dtype)
            dk += scores_grad.transpose(-1, -2) @ queries.to(wide)
        return dq, dk.to(k.dtype), dv.to(v.dtype)

    @staticmethod
    def _blocks(q: torch.Tensor, k: torch.Tensor) -> list[tuple[int, int]]:
        n, heads, length = q.shape[:3]
        size = max(1, MATH_BLOCK_ELEMENTS // max(1, n * heads * k.shape[2]))
        return [(first, min(length, first + size)) for first in range(0, length, size)]

    @staticmethod
    def _fold(x: torch.Tensor, kv_heads: int) -> torch.Tensor:
        """``[n, H_q, b, …] → [n, H_kv, g·b, …]`` (query head ``h`` belongs to kv head ``h // g``)."""
        n, heads, rows = x.shape[:3]
        return x.reshape(n, kv_heads, heads // kv_heads * rows, *x.shape[3:])

    @staticmethod
    def _unfold(x: torch.Tensor, heads: int) -> torch.Tensor:
        n, kv_heads, rows = x.shape[:3]
        return x.reshape(n, heads, rows * kv_heads // heads, *x.shape[3:])

    @staticmethod
    def _probabilities(queries: torch.Tensor, k: torch.Tensor, causal: bool, mask: torch.Tensor | None,
                       rows: range, lse: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """Softmax of a folded block's scores (normalised by ``lse`` when given) and its lse;
        the block holds query rows ``rows`` of each of the kv head's query heads."""
        wide = torch.promote_types(queries.dtype, torch.float32)
        scores = (queries.to(wide) @ k.to(wide).transpose(-1, -2)) * queries.shape[-1] ** -0.5
        if causal:
            folded = torch.arange(scores.shape[2], device=k.device) % len(rows) + rows.start
            scores = scores.masked_fill(torch.arange(k.shape[2], device=k.device)[None, :] > folded[:, None],
                                        float("-inf"))
        if mask is not None:
            scores = scores.masked_fill(~mask[:, None, None, :], float("-inf"))
        if lse is None:
            lse = torch.logsumexp(scores, dim=-1)
        return torch.exp(scores - lse.unsqueeze(-1)), lse


_DENSE: dict[KernelKind, DenseKernel] = {KernelKind.CPU_FLASH: _CpuFlash(), KernelKind.MATH: _Math()}


@lru_cache(maxsize=1)
def _cpu_flash_ops() -> tuple[Callable, Callable] | None:
    """ATen's CPU FlashAttention forward and backward, when this torch has them."""
    ops = torch.ops.aten
    if not (hasattr(ops, "_scaled_dot_product_flash_attention_for_cpu")
            and hasattr(ops, "_scaled_dot_product_flash_attention_for_cpu_backward")):
        return None
    return ops._scaled_dot_product_flash_attention_for_cpu, ops._scaled_dot_product_flash_attention_for_cpu_backward


@lru_cache(maxsize=1)
def _varlen_kernel() -> VarlenKernel | None:
    """``varlen_attn`` when this torch has it with causal windows (imported only when asked:
    importing it loads ``torch._dynamo``, seconds of start-up)."""
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        return None
    return varlen_kernel_of(varlen_attn)


def varlen_kernel_of(function: Callable) -> VarlenKernel | None:
    """``function`` as the varlen kernel when its signature takes ``window_size`` (None: torch
    2.10's ``varlen_attn`` has only ``is_causal``), grouping kv heads itself where it takes
    ``enable_gqa``."""
    parameters = inspect.signature(function).parameters
    if "window_size" not in parameters:
        return None
    return VarlenKernel(function, "enable_gqa" in parameters)

"""Packed attention equals one dense call under the full document-causal mask, whole (cp = 1) and
split over context-parallel ranks (keys gathered rank-major): outputs and gradients, every
kernel, and the variable-length plan the CUDA kernel runs."""

import pytest
import torch
import torch.nn.functional as F

from hydraulis.base.types import MicroBatch
from hydraulis.runtime.model import attention
from hydraulis.runtime.model.attention import KernelKind, packed_attention, varlen_kernel_of
from hydraulis.runtime.model.attention_spans import document_plan, padded_length, varlen_plan
from hydraulis.runtime.model.packing import pack_micro_batch
from hydraulis.runtime.parallel.context import context_spans, load_balanced_indices
from hydraulis.runtime.parallel.group import ParallelGroup

CPU = torch.device("cpu")
LENGTHS = (12, 6, 24, 6, 40)
HEADS, KV_HEADS, DIM = 4, 2, 8


def document_causal_mask(docs: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """``mask[i, j] = (d_j = d_i) ∧ (p_j ≤ p_i)`` (True: may attend)."""
    return (docs[:, None] == docs[None, :]) & (positions[None, :] <= positions[:, None])


def full_mask_attention(q, k, v, bounds):
    """The reference: every query against every key under the block-diagonal causal mask."""
    docs = torch.cat([torch.full((b - a,), i) for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]))])
    positions = torch.cat([torch.arange(b - a) for a, b in zip(bounds[:-1], bounds[1:])])
    group = q.shape[1] // k.shape[1]
    k, v = (t.repeat_interleave(group, dim=1) for t in (k, v))
    out = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1),
                                         attn_mask=document_causal_mask(docs, positions))
    return out.transpose(0, 1).reshape(q.shape[0], -1)


def _inputs(total: int):
    generator = torch.Generator().manual_seed(0)
    return [torch.randn(total, heads, DIM, generator=generator, dtype=torch.float64, requires_grad=True)
            for heads in (HEADS, KV_HEADS, KV_HEADS)]


def _packed(cp: int, rank: int):
    documents = [torch.arange(s + 1) for s in LENGTHS]
    group = ParallelGroup(None, cp, rank) if cp > 1 else ParallelGroup.single()
    return pack_micro_batch(documents, MicroBatch(tuple(range(len(LENGTHS))), LENGTHS), 1, group, CPU)


@pytest.mark.parametrize("kernel", [KernelKind.CPU_FLASH, KernelKind.MATH])
@pytest.mark.parametrize("cp", [1, 2, 3])
def test_segments_equal_the_full_mask_forward_and_backward(cp, kernel):
    _assert_ranks_equal_the_full_mask(
        cp, lambda q, k, v, rank, bounds, mine: packed_attention(q, k, v, _packed(cp, rank).attention, kernel))


def _assert_ranks_equal_the_full_mask(cp, attend):
    """Every cp rank's ``attend(q[mine], k[gathered], v[gathered], rank, bounds, mine)`` equals its
    rows of the full-mask reference, and the ranks' gradients sum to the reference's."""
    bounds = _packed(cp, 0).cu_seqlens.tolist()
    q, k, v = _inputs(bounds[-1])
    reference = full_mask_attention(q, k, v, bounds)
    weights = torch.randn(reference.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    expected = torch.autograd.grad((reference * weights).sum(), (q, k, v))
    per_rank = [load_balanced_indices(bounds, cp, r) for r in range(cp)] if cp > 1 else [list(range(bounds[-1]))]
    gathered = torch.tensor([i for part in per_rank for i in part])
    grads = [torch.zeros_like(t) for t in (q, k, v)]
    for rank in range(cp):
        mine = torch.tensor(per_rank[rank])
        out = attend(q[mine], k[gathered], v[gathered], rank, bounds, mine)
        assert torch.allclose(out, reference[mine], rtol=1e-10, atol=1e-12)
        for total, grad in zip(grads, torch.autograd.grad((out * weights[mine]).sum(), (q, k, v))):
            total += grad
    for grad, want in zip(grads, expected):
        assert torch.allclose(grad, want, rtol=1e-10, atol=1e-12)


def _varlen_reference(q, k, v, plan):
    """What ``varlen_attn`` computes: each span's queries against its keys, causal at the
    bottom right (flash-attention's convention for windows)."""
    if plan.key_index is not None:
        k, v = k[plan.key_index], v[plan.key_index]
    cu_q, cu_k = plan.cu_seqlens_q.tolist(), plan.cu_seqlens_k.tolist()
    outs = []
    for qa, qb, ka, kb in zip(cu_q[:-1], cu_q[1:], cu_k[:-1], cu_k[1:]):
        queries, keys = qb - qa, kb - ka
        mask = torch.ones(queries, keys, dtype=torch.bool).tril(keys - queries)
        outs.append(F.scaled_dot_product_attention(q[qa:qb].transpose(0, 1), k[ka:kb].transpose(0, 1),
                                                   v[ka:kb].transpose(0, 1), attn_mask=mask, enable_gqa=True))
    return torch.cat(outs, dim=1).transpose(0, 1).reshape(q.shape[0], -1)


@pytest.mark.parametrize("cp", [1, 2, 3])
def test_the_varlen_plan_runs_every_segment_against_its_keys(cp):
    bounds = _packed(cp, 0).cu_seqlens.tolist()
    q, k, v = (t.detach() for t in _inputs(bounds[-1]))
    reference = full_mask_attention(q, k, v, bounds)
    per_rank = [load_balanced_indices(bounds, cp, r) for r in range(cp)] if cp > 1 else [list(range(bounds[-1]))]
    gathered = torch.tensor([i for part in per_rank for i in part])
    for rank in range(cp):
        mine = torch.tensor(per_rank[rank])
        plan = varlen_plan(context_spans(bounds, cp, rank), mine.numel(), CPU)
        assert (plan.key_index is None) == (cp == 1)
        out = _varlen_reference(q[mine], k[gathered], v[gathered], plan)
        assert torch.allclose(out, reference[mine], rtol=1e-10, atol=1e-12)


def _varlen_without_gqa(q, k, v, cu_q, cu_k, max_q, max_k, *, window_size=(-1, -1)):
    """A ``varlen_attn`` as torch 2.11 has it: causal windows, one kv head per query head."""
    assert k.shape[1] == q.shape[1] and window_size == (-1, 0)
    return _segments_attention(q, k, v, cu_q, cu_k, gqa=False)


def _varlen_with_gqa(q, k, v, cu_q, cu_k, max_q, max_k, *, window_size=(-1, -1), enable_gqa=False):
    """A ``varlen_attn`` as torch 2.12 has it: grouped kv heads read in place."""
    assert enable_gqa == (k.shape[1] != q.shape[1]) and window_size == (-1, 0)
    return _segments_attention(q, k, v, cu_q, cu_k, gqa=enable_gqa)


def _segments_attention(q, k, v, cu_q, cu_k, gqa):
    cu_q, cu_k = cu_q.tolist(), cu_k.tolist()
    outs = []
    for qa, qb, ka, kb in zip(cu_q[:-1], cu_q[1:], cu_k[:-1], cu_k[1:]):
        mask = torch.ones(qb - qa, kb - ka, dtype=torch.bool).tril(kb - ka - qb + qa)
        outs.append(F.scaled_dot_product_attention(q[qa:qb].transpose(0, 1), k[ka:kb].transpose(0, 1),
                                                   v[ka:kb].transpose(0, 1), attn_mask=mask, enable_gqa=gqa))
    return torch.cat(outs, dim=1).transpose(0, 1)


def test_the_varlen_kernel_is_told_apart_by_its_signature():
    def is_causal_only(q, k, v, cu_q, cu_k, max_q, max_k, is_causal=False):
        return q

    assert varlen_kernel_of(is_causal_only) is None
    assert not varlen_kernel_of(_varlen_without_gqa).native_gqa
    assert varlen_kernel_of(_varlen_with_gqa).native_gqa


@pytest.mark.parametrize("function", [_varlen_without_gqa, _varlen_with_gqa])
@pytest.mark.parametrize("cp", [1, 2])
def test_grouped_query_attention_on_a_varlen_kernel_with_and_without_enable_gqa(cp, function, monkeypatch):
    monkeypatch.setattr(attention, "_varlen_kernel", lambda: varlen_kernel_of(function))
    _assert_ranks_equal_the_full_mask(
        cp, lambda q, k, v, rank, bounds, mine: packed_attention(
            q, k, v, varlen_plan(context_spans(bounds, cp, rank), mine.numel(), CPU)))


def test_padded_sizes_waste_at_most_an_eighth_above_sixteen():
    assert [padded_length(n) for n in (1, 16, 17, 100, 4097)] == [16, 16, 18, 104, 4608]
    assert all(n <= padded_length(n) <= max(16, n * 9 / 8) for n in range(1, 5000))


def test_short_documents_share_one_call_per_padded_size():
    documents = [torch.arange(17) for _ in range(300)] + [torch.arange(101)]
    packed = pack_micro_batch(documents, MicroBatch(tuple(range(301)), (16,) * 300 + (100,)), 1,
                              ParallelGroup.single(), CPU)
    assert [(c.parts, c.query_length) for c in packed.attention.calls] == [(300, 16), (1, 104)]


def test_whole_documents_plan_from_their_bounds_as_from_their_segments():
    bounds = _packed(1, 0).cu_seqlens.tolist()
    direct, general = document_plan(bounds, CPU), varlen_plan(context_spans(bounds, 1, 0), bounds[-1], CPU)
    assert torch.equal(direct.cu_seqlens_q, general.cu_seqlens_q)
    assert torch.equal(direct.cu_seqlens_k, general.cu_seqlens_k)
    assert direct.key_index is None and general.key_index is None
    assert (direct.max_queries, direct.max_keys) == (general.max_queries, general.max_keys)

"""Document-by-document attention equals one call with the full document-causal mask, whole
(cp = 1) and split over context-parallel ranks (keys gathered rank-major)."""

import pytest
import torch
import torch.nn.functional as F

from hydraulis.runtime.model.attention import document_causal_mask, packed_attention
from hydraulis.runtime.model.packing import pack_micro_batch
from hydraulis.runtime.parallel.context import load_balanced_indices
from hydraulis.runtime.parallel.group import ParallelGroup
from hydraulis.types import MicroBatch

CPU = torch.device("cpu")


def _full_mask_attention(q, k, v, docs, positions):
    """The reference: every query against every key under the block-diagonal causal mask."""
    mask = document_causal_mask(docs, positions, docs, positions)
    group = q.shape[1] // k.shape[1]
    k, v = (t.repeat_interleave(group, dim=1) for t in (k, v))
    out = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), attn_mask=mask)
    return out.transpose(0, 1).reshape(q.shape[0], -1)


@pytest.mark.parametrize("cp", [1, 2, 3])
def test_document_blocks_equal_the_full_mask(cp):
    lengths = (12, 6, 24, 6)
    docs_tokens = [torch.arange(s + 1) for s in lengths]
    micro_batch = MicroBatch(tuple(range(len(lengths))), lengths)
    bounds = micro_batch.cu_seqlens(2 * cp if cp > 1 else 1)
    total = bounds[-1]
    docs = torch.cat([torch.full((b - a,), i) for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]))])
    positions = torch.cat([torch.arange(b - a) for a, b in zip(bounds[:-1], bounds[1:])])
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(total, heads, 8, generator=generator, dtype=torch.float64) for heads in (4, 2, 2))
    reference = _full_mask_attention(q, k, v, docs, positions)
    per_rank = [load_balanced_indices(bounds, cp, r) for r in range(cp)] if cp > 1 else [list(range(total))]
    gathered = torch.tensor([i for part in per_rank for i in part])
    for rank in range(cp):
        group = ParallelGroup(None, cp, rank) if cp > 1 else ParallelGroup.single()
        packed = pack_micro_batch(docs_tokens, micro_batch, 1, group, CPU)
        mine = torch.tensor(per_rank[rank])
        out = packed_attention(q[mine], k[gathered], v[gathered], packed.blocks)
        assert torch.allclose(out, reference[mine], atol=1e-12)
        assert len(packed.blocks) == len(lengths)

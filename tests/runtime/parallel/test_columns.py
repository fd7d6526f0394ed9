"""Fused projections: a block's column weights laid out in one storage run as one product whose
output and gradients (input and every weight) equal the separate linears'."""

import torch
import torch.nn.functional as F

from hydraulis.base.presets import model_preset
from hydraulis.base.types import Scheme
from hydraulis.runtime.model.decoder import StageModel
from hydraulis.runtime.parallel import columns
from hydraulis.runtime.parallel.columns import column_parallel, stacked_rows
from hydraulis.runtime.parallel.group import ParallelGroup
from hydraulis.sharding.pipeline import PipelineSplit

SINGLE = ParallelGroup.single()


def test_one_product_equals_the_separate_linears_forward_and_backward():
    generator = torch.Generator().manual_seed(0)
    storage = torch.randn(12, 8, generator=generator, dtype=torch.float64)
    fused = [torch.nn.Parameter(rows) for rows in storage.split([6, 3, 3])]
    separate = [torch.nn.Parameter(w.detach().clone()) for w in fused]
    assert stacked_rows(fused) and not stacked_rows(separate)
    x = torch.randn(5, 8, generator=generator, dtype=torch.float64, requires_grad=True)
    y = x.detach().clone().requires_grad_(True)
    weights = torch.randn(5, 12, generator=generator, dtype=torch.float64)
    ours, theirs = column_parallel(x, fused, SINGLE, False), column_parallel(y, separate, SINGLE, False)
    for a, b in zip(ours, theirs):
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-12)
    (torch.cat(ours, dim=-1) * weights).sum().backward()
    (torch.cat([F.linear(y, w) for w in separate], dim=-1) * weights).sum().backward()
    assert torch.allclose(x.grad, y.grad, rtol=1e-12, atol=1e-12)
    for a, b in zip(fused, separate):
        assert torch.allclose(a.grad, b.grad, rtol=1e-12, atol=1e-12)


def test_a_stage_lays_out_its_blocks_column_weights_in_one_storage_and_runs_them_fused(monkeypatch):
    tiny = model_preset("tiny")
    model = StageModel(tiny, PipelineSplit(Scheme(1, 1, 1), (tiny.layers,)), 0, SINGLE, SINGLE, torch.float32,
                       torch.device("cpu"))
    for layer in model.layers.values():
        for block in (layer.attn, layer.mlp):
            assert stacked_rows([child.weight for child in block.fused_children])
    for param in model.parameters():
        param.data = param.data.new_empty(0)
    model.allocate()
    assert all(p.shape == model.shapes[name] for name, p in model.named_parameters())
    assert stacked_rows([child.weight for child in model.layers["0"].attn.fused_children])
    calls = []
    monkeypatch.setattr(columns._FusedColumns, "apply", lambda *args: calls.append(args) or
                        torch.cat([F.linear(args[0], w) for w in args[1:]], dim=-1))
    column_parallel(torch.randn(3, tiny.hidden), [c.weight for c in model.layers["0"].mlp.fused_children],
                    SINGLE, False)
    assert len(calls) == 1

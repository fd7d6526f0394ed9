"""Recomputation changes what a stage keeps for its backward, never its gradients."""

import pytest
import torch

from hydraulis.base.presets import model_preset
from hydraulis.base.types import MicroBatch, Recompute, Scheme
from hydraulis.runtime.model.decoder import StageModel
from hydraulis.runtime.model.packing import pack_micro_batch
from hydraulis.runtime.parallel.group import ParallelGroup
from hydraulis.sharding.pipeline import PipelineSplit

TINY = model_preset("tiny")
SINGLE = ParallelGroup.single()
LENGTHS = (40, 24)


def _middle_stage(recompute: Recompute, layers: tuple[int, ...] = ()) -> StageModel:
    """Stage 1 of 3 (two decoder layers, no embedding or head), weights from one seed."""
    scheme = Scheme(1, 1, 3, recompute=recompute, recompute_layers=layers)
    stage = StageModel(TINY, PipelineSplit(scheme, (1, 2, 1)), 1, SINGLE, SINGLE, torch.float64, torch.device("cpu"))
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for param in stage.parameters():
            param.copy_(torch.randn(param.shape, generator=generator, dtype=torch.float64) * 0.1 + (param.dim() == 1))
    return stage


def _run(recompute: Recompute, layers: tuple[int, ...] = ()) -> tuple[dict[str, torch.Tensor], torch.Tensor, int]:
    """Gradients of the parameters and the input, and the bytes autograd kept for the backward."""
    stage = _middle_stage(recompute, layers)
    documents = [torch.arange(s + 1) % TINY.vocab for s in LENGTHS]
    batch = pack_micro_batch(documents, MicroBatch((0, 1), LENGTHS), 1, SINGLE, torch.device("cpu"))
    hidden = torch.randn(batch.tokens, TINY.hidden, generator=torch.Generator().manual_seed(1), dtype=torch.float64,
                         requires_grad=True)
    params = {p.untyped_storage().data_ptr() for p in stage.parameters()}
    kept: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in params:
            kept[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        out = stage(hidden, batch)
    out.pow(2).sum().backward()
    return {n: p.grad for n, p in stage.named_parameters()}, hidden.grad, sum(kept.values())


def test_recomputation_keeps_less_and_computes_the_same_gradients():
    grads, input_grad, kept = _run(Recompute.NONE)
    previous = kept
    for recompute in (Recompute.SELECTIVE, Recompute.FULL):
        other_grads, other_input_grad, other_kept = _run(recompute)
        assert torch.allclose(other_input_grad, input_grad, rtol=1e-12, atol=1e-14)
        for name, grad in grads.items():
            assert torch.allclose(other_grads[name], grad, rtol=1e-12, atol=1e-14), name
        assert other_kept < previous, recompute
        previous = other_kept



@pytest.mark.parametrize("layers", [(1,), (0, 1, 1)])
def test_recomputing_the_first_layer_of_the_stage_keeps_between_none_and_full(layers):
    grads, input_grad, kept_none = _run(Recompute.NONE)
    _, _, kept_full = _run(Recompute.FULL)
    other_grads, other_input_grad, kept = _run(Recompute.FULL, layers)
    assert [layer.recompute for layer in _middle_stage(Recompute.FULL, layers).layers.values()] == [
        Recompute.FULL, Recompute.NONE]
    assert torch.allclose(other_input_grad, input_grad, rtol=1e-12, atol=1e-14)
    for name, grad in grads.items():
        assert torch.allclose(other_grads[name], grad, rtol=1e-12, atol=1e-14), name
    assert kept_full < kept < kept_none

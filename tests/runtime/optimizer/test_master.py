"""The optimizer buffer: initial weights independent of the layout, and an update that is
elementwise identical however the elements are cut into buffers (so a distributed run and the
single-device reference differ only by their gradients' summation order)."""

import numpy as np
import pytest
import torch

from hydraulis.base.presets import model_preset
from hydraulis.base.types import OptimizerLayout
from hydraulis.job.config import RuntimeOptions
from hydraulis.job.schedule import LrScheduleKind
from hydraulis.runtime.optimizer.master import OptimizerShard, assemble_canonical, initial_weights
from hydraulis.sharding.kinds import OptimizerKind
from hydraulis.sharding.ownership import OptimizerOwnership
from hydraulis.sharding.ranges import Region, overlap

TINY = model_preset("tiny")
CPU = torch.device("cpu")
UNCLIPPED = torch.tensor(0.0)
"""A gradient norm that clipping leaves alone."""


def shards(layout: OptimizerLayout, world: int, options: RuntimeOptions) -> list[OptimizerShard]:
    placement = OptimizerOwnership(TINY, layout, world)
    return [OptimizerShard(placement, rank, options, CPU) for rank in range(world)]


def canonical(buffers: list[OptimizerShard], name: str = "master") -> dict[str, torch.Tensor]:
    full = assemble_canonical(buffers[0].placement, lambda rank: buffers[rank].tensors[name])
    return {key: value.reshape(-1) for key, value in full.items()}


def test_every_layout_starts_from_the_same_weights():
    reference = {name: value.reshape(-1) for name, value in initial_weights(TINY, 3).items()}
    for layout, world in [(OptimizerLayout(1, 1, 1), 1), (OptimizerLayout(2, 2, 1), 4), (OptimizerLayout(1, 1, 2), 4)]:
        started = canonical(shards(layout, world, RuntimeOptions(seed=3)))
        assert all(torch.equal(started[name], reference[name]) for name in reference)
    assert not torch.equal(initial_weights(TINY, 4)["embed.weight"], initial_weights(TINY, 3)["embed.weight"])
    assert torch.equal(initial_weights(TINY, 3)["norm.weight"], torch.ones(TINY.hidden))


@pytest.mark.parametrize("optimizer", [OptimizerKind.ADAM, OptimizerKind.SGD])
def test_updates_are_elementwise_identical_under_any_layout(optimizer):
    options = RuntimeOptions(optimizer=optimizer, lr=1e-3, seed=1)
    one = shards(OptimizerLayout(1, 1, 1), 1, options)
    many = shards(OptimizerLayout(2, 1, 2), 4, options)
    rng = np.random.default_rng(0)
    for _ in range(4):
        grads = {spec.name: torch.from_numpy(rng.standard_normal(spec.numel).astype(np.float32)
                                             * 10.0 ** rng.integers(-12, -1, spec.numel))
                 for spec in one[0].placement.specs}
        for shard in one + many:
            for region in shard.regions:
                for block in overlap(Region.whole(region.spec), region):
                    block.b_view(shard.grad).copy_(block.a_view(grads[region.spec.name]))
            shard.step(UNCLIPPED, options.schedule(4))
    for name in ("master",) + (("exp_avg", "exp_avg_sq") if optimizer is OptimizerKind.ADAM else ()):
        a, b = canonical(one, name), canonical(many, name)
        assert all(torch.equal(a[key], b[key]) for key in a), name
    moved = canonical(one)["layers.0.attn.wq.weight"] - initial_weights(TINY, 1)["layers.0.attn.wq.weight"].reshape(-1)
    assert moved.abs().max() > 0


def test_adam_matches_torch_adam_up_to_rounding():
    options = RuntimeOptions(optimizer=OptimizerKind.ADAM, lr=1e-2, seed=0, lr_schedule=LrScheduleKind.CONSTANT)
    shard = shards(OptimizerLayout(1, 1, 1), 1, options)[0]
    param = torch.nn.Parameter(shard.master.clone())
    reference = torch.optim.Adam([param], lr=1e-2)
    for k in range(3):
        grad = torch.randn(shard.master.shape, generator=torch.Generator().manual_seed(k))
        shard.grad.copy_(grad)
        shard.step(UNCLIPPED, options.schedule(3))
        param.grad = grad.clone()
        reference.step()
    assert torch.allclose(shard.master, param.detach(), rtol=0, atol=1e-6)

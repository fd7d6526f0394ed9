"""AdamW on the flat buffers of the optimizer layout against ``torch.optim.AdamW`` with parameter
groups, ``clip_grad_norm_`` and ``LambdaLR`` on the canonical tensors; the global gradient norm
counts every element once; a non-finite norm skips the update."""

import math

import torch

from hydraulis.base.presets import model_preset
from hydraulis.base.types import OptimizerLayout
from hydraulis.job.config import RuntimeOptions
from hydraulis.runtime.optimizer.clipping import global_grad_norm
from hydraulis.runtime.optimizer.master import OptimizerShard, assemble_canonical, decays, initial_weights
from hydraulis.runtime.parallel.group import ParallelGroup
from hydraulis.sharding.ownership import OptimizerOwnership
from hydraulis.sharding.parameters import parameter_specs
from hydraulis.sharding.ranges import Region, overlap

TINY = model_preset("tiny")
CPU = torch.device("cpu")
OPTIONS = RuntimeOptions(lr=1e-2, seed=2, clip_grad_norm=0.5, warmup_steps=1, min_lr=1e-3, decay_embeddings=False)
STEPS = 4


def owners(world: int) -> list[OptimizerShard]:
    placement = OptimizerOwnership(TINY, OptimizerLayout(2, 1, 2), world)
    return [OptimizerShard(placement, rank, OPTIONS, CPU) for rank in range(world)]


def fill(shards: list[OptimizerShard], grads: dict[str, torch.Tensor]) -> None:
    for shard in shards:
        for region in shard.regions:
            for block in overlap(Region.whole(region.spec), region):
                block.b_view(shard.grad).copy_(block.a_view(grads[region.spec.name].reshape(-1)))


def test_decay_groups():
    specs = {spec.name: spec for spec in parameter_specs(TINY)}
    assert decays(specs["layers.0.attn.wq.weight"], OPTIONS) and not decays(specs["norm.weight"], OPTIONS)
    assert not decays(specs["embed.weight"], OPTIONS) and not decays(specs["head.weight"], OPTIONS)
    assert decays(specs["head.weight"], RuntimeOptions()) and not decays(specs["layers.1.mlp_norm.weight"],
                                                                         RuntimeOptions())


def test_sharded_adamw_equals_torch_adamw_clip_and_lambda_lr():
    shards = owners(4)
    params = {name: torch.nn.Parameter(value) for name, value in initial_weights(TINY, OPTIONS.seed).items()}
    specs = {spec.name: spec for spec in parameter_specs(TINY)}
    groups = [{"params": [p for n, p in params.items() if decays(specs[n], OPTIONS) is decay],
               "weight_decay": OPTIONS.weight_decay if decay else 0.0} for decay in (True, False)]
    reference = torch.optim.AdamW(groups, lr=OPTIONS.lr, betas=OPTIONS.betas, eps=OPTIONS.eps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(reference, OPTIONS.schedule(STEPS).factor)
    generator = torch.Generator().manual_seed(0)
    for _ in range(STEPS):
        grads = {name: torch.randn(p.shape, generator=generator) * 0.01 for name, p in params.items()}
        for name, p in params.items():
            p.grad = grads[name].clone()
        expected = torch.nn.utils.clip_grad_norm_(list(params.values()), OPTIONS.clip_grad_norm)
        fill(shards, grads)
        norm = torch.stack([global_grad_norm(s.grad, ParallelGroup.single()) for s in shards]).square().sum().sqrt()
        assert math.isclose(norm.item(), expected.item(), rel_tol=1e-6) and expected > OPTIONS.clip_grad_norm
        updates = [s.step(norm, OPTIONS.schedule(STEPS)) for s in shards]
        assert {u.lr for u in updates} == {reference.param_groups[0]["lr"]}
        reference.step()
        scheduler.step()
    ours = assemble_canonical(shards[0].placement, lambda rank: shards[rank].master)
    for name, p in params.items():
        assert torch.allclose(ours[name], p.detach(), rtol=1e-6, atol=1e-8), name


def test_a_non_finite_norm_skips_the_update_and_counts_it():
    shard = owners(4)[1]
    before = {name: tensor.clone() for name, tensor in shard.tensors.items()}
    shard.grad.fill_(0.1)
    shard.grad[0] = math.inf
    update = shard.step(global_grad_norm(shard.grad, ParallelGroup.single()), OPTIONS.schedule(STEPS))
    assert update.skipped and math.isinf(update.grad_norm) and (shard.steps, shard.skipped) == (0, 1)
    assert all(torch.equal(shard.tensors[name], before[name]) for name in before)

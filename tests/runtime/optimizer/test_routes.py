"""Routes against the element-wise oracle, every rank simulated in one process: the reduction
sums each element over exactly its contributing holders, propagation gives every shard its
canonical values; plans stay tiny at 7B–70B scale."""

import pytest
import torch

from hydraulis.presets import model_preset
from hydraulis.runtime.optimizer.master import assemble_canonical
from hydraulis.layout.optimizer_placement import OptimizerPlacement
from hydraulis.layout.ranges import Region, overlap
from hydraulis.runtime.optimizer.routes import Route, route_plan
from hydraulis.layout.sharding import parameter_specs
from hydraulis.runtime.rank_map import RankMap
from hydraulis.job.strategy_spec import parse_strategy, scheme_times
from hydraulis.types import OptimizerLayout

TINY = model_preset("tiny")
CASES = [("1,1,1x4", (4, 1, 1), 4), ("1,2,1+1,1,2", (2, 1, 2), 4), ("1,4,1", (1, 4, 1), 4),
         ("1,1,2:3/1+2,1,1", (2, 2, 1), 4), ("2,2,1", (1, 2, 2), 4), ("1,2,1", (3, 1, 1), 6),
         ("1,1,3+1,2,1", (2, 1, 4), 8)]


def routes(spec: str, layout: tuple[int, int, int], world: int) -> tuple[OptimizerPlacement, list[Route]]:
    placement = OptimizerPlacement(TINY, OptimizerLayout(*layout), world)
    strategy = parse_strategy(spec, TINY, scheme_times(TINY, world), 64)
    rank_map = RankMap(strategy.pipelines, world)
    return placement, [Route(route_plan(placement, rank_map, rank), None) for rank in range(world)]


def exchange(outgoing: list[torch.Tensor], sent: list[list[int]]) -> list[torch.Tensor]:
    """``all_to_all_single`` among the simulated ranks: rank ``o`` receives every source's part
    for it, source-major."""
    parts = [list(t.split(counts)) for t, counts in zip(outgoing, sent)]
    return [torch.cat([parts[s][o] for s in range(len(parts))]) for o in range(len(parts))]


def values(seed: int) -> dict[str, torch.Tensor]:
    """Small integers: every sum of them is exact in fp32, whatever its order."""
    generator = torch.Generator().manual_seed(seed)
    return {s.name: torch.randint(-50, 50, s.shape, generator=generator).float() for s in parameter_specs(TINY)}


@pytest.mark.parametrize("spec, layout, world", CASES)
def test_reduce_sums_each_element_over_its_contributing_holders(spec, layout, world):
    placement, every = routes(spec, layout, world)
    grads, holders = values(1), {name: torch.zeros_like(t) for name, t in values(1).items()}
    outgoing = []
    for route in every:
        mine = []
        for shard in route.shards:
            mine.append(shard.of(grads[shard.name]).clone() + (0 if shard.contributes else 1000))
            if shard.contributes:
                shard.of(holders[shard.name]).add_(1)
        outgoing.append(route.pack_gradients(mine, torch.device("cpu")))
    incoming = exchange(outgoing, [route.sent[True] for route in every])
    buffers = [torch.full((placement.buffer_size(r),), float("nan")) for r in range(world)]
    for route, received, buffer in zip(every, incoming, buffers):
        assert received.numel() == sum(route.received[True])
        route.add_received(received, buffer)
    reduced = assemble_canonical(placement, lambda rank: buffers[rank])
    for name, grad in grads.items():
        assert torch.equal(reduced[name], grad * holders[name]), name
    assert all(h.min() >= 1 for h in holders.values())


@pytest.mark.parametrize("spec, layout, world", CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_propagate_gives_every_shard_its_canonical_values(spec, layout, world, dtype):
    placement, every = routes(spec, layout, world)
    weights = values(2)
    masters = []
    for rank in range(world):
        master = torch.full((placement.buffer_size(rank),), float("nan"))
        for region in placement.owned_regions(rank):
            for block in overlap(Region.whole(region.spec), region):
                block.b_view(master).copy_(block.a_view(weights[region.spec.name].reshape(-1)))
        masters.append(master)
    outgoing = [route.pack_weights(master, dtype) for route, master in zip(every, masters)]
    incoming = exchange(outgoing, [route.received[False] for route in every])
    for route, received in zip(every, incoming):
        params = [torch.full(shard.shape, float("nan"), dtype=dtype) for shard in route.shards]
        route.copy_received(received, params)
        for shard, param in zip(route.shards, params):
            assert torch.equal(param, shard.of(weights[shard.name]).to(dtype)), shard.name


@pytest.mark.parametrize("name, spec, devices", [("llama-7b", "1,8,1x8", 64), ("llama-70b", "1,8,4x32", 1024)])
def test_plans_at_scale_hold_kilobytes_not_an_entry_per_element(name, spec, devices):
    model = model_preset(name)
    placement = OptimizerPlacement(model, OptimizerLayout(devices, 1, 1), devices)
    rank_map = RankMap(parse_strategy(spec, model, scheme_times(model, devices), 4096).pipelines, devices)
    for rank in (0, devices // 2 + 1, devices - 1):
        plan = route_plan(placement, rank_map, rank)
        held = sum(shard.spec.numel if shard.dim is None else shard.spec.numel // shard.spec.shape[shard.dim]
                   * shard.length for shard in plan.shards)
        assert sum(plan.sent(False)) == held
        assert sum(plan.received(False)) >= placement.buffer_size(rank) * len(rank_map.pipelines)
        assert plan.nbytes <= 256 * 1024

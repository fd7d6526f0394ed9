"""Routes against the element-wise oracle, every rank simulated in one process: the reduction
sums each element over exactly its contributing holders, propagation gives every shard its
canonical values; plans stay tiny at 7B–70B scale."""

import pytest
import torch

from hydraulis.base.presets import model_preset
from hydraulis.base.types import OptimizerLayout
from hydraulis.job.strategy_spec import parse_strategy, scheme_times
from hydraulis.runtime.optimizer.master import assemble_canonical
from hydraulis.runtime.optimizer.routes import Route, route_plan
from hydraulis.runtime.rank_map import RankMap
from hydraulis.sharding.ownership import OptimizerOwnership
from hydraulis.sharding.parameters import parameter_specs
from hydraulis.sharding.ranges import Region, overlap

TINY = model_preset("tiny")
CASES = [("1,1,1x4", (4, 1, 1), 4), ("1,2,1+1,1,2", (2, 1, 2), 4), ("1,4,1", (1, 4, 1), 4),
         ("1,1,2:3/1+2,1,1", (2, 2, 1), 4), ("2,2,1", (1, 2, 2), 4), ("1,2,1", (3, 1, 1), 6),
         ("1,1,3+1,2,1", (2, 1, 4), 8)]


def routes(spec: str, layout: tuple[int, int, int], world: int,
           buckets: tuple[int, int] | None = None) -> tuple[OptimizerOwnership, list[Route]]:
    placement = OptimizerOwnership(TINY, OptimizerLayout(*layout), world)
    strategy = parse_strategy(spec, TINY, scheme_times(TINY, world), 64)
    rank_map = RankMap(strategy.pipelines, world)
    return placement, [Route(route_plan(placement, rank_map, rank, buckets), None) for rank in range(world)]


def exchange(outgoing: list[torch.Tensor], sent: list[list[int]]) -> list[torch.Tensor]:
    """``all_to_all_single`` among the simulated ranks: rank ``o`` receives every source's part
    for it, source-major."""
    parts = [list(t.split(counts)) for t, counts in zip(outgoing, sent)]
    return [torch.cat([parts[s][o] for s in range(len(parts))]) for o in range(len(parts))]


def values(seed: int) -> dict[str, torch.Tensor]:
    """Small integers: every sum of them is exact in fp32, whatever its order."""
    generator = torch.Generator().manual_seed(seed)
    return {s.name: torch.randint(-50, 50, s.shape, generator=generator).float() for s in parameter_specs(TINY)}


BUCKETINGS = [None, (20_000, 5_000)]
"""One bucket per rank, and buckets of 20,000 elements after a first of 5,000 (tiny's shards cut into several)."""


@pytest.mark.parametrize("buckets", BUCKETINGS)
@pytest.mark.parametrize("spec, layout, world", CASES)
def test_reduce_sums_each_element_over_its_contributing_holders(spec, layout, world, buckets):
    placement, every = routes(spec, layout, world, buckets)
    grads, holders = values(1), {name: torch.zeros_like(t) for name, t in values(1).items()}
    mine_of = []
    for route in every:
        mine = []
        for shard in route.shards:
            mine.append(shard.of(grads[shard.name]).clone() + (0 if shard.contributes else 1000))
            if shard.contributes:
                shard.of(holders[shard.name]).add_(1)
        mine_of.append(mine)
    buffers = [torch.zeros(placement.buffer_size(r)) for r in range(world)]
    assert len({route.buckets for route in every}) == 1
    for k in range(every[0].buckets):
        outgoing = [route.pack_gradients(mine, torch.device("cpu"), k) for route, mine in zip(every, mine_of)]
        incoming = exchange(outgoing, [route.sent[True][k] for route in every])
        for route, received, buffer in zip(every, incoming, buffers):
            assert received.numel() == sum(route.received[True][k])
            route.add_received(received, buffer, k)
    reduced = assemble_canonical(placement, lambda rank: buffers[rank])
    for name, grad in grads.items():
        assert torch.equal(reduced[name], grad * holders[name]), name
    assert all(h.min() >= 1 for h in holders.values())


@pytest.mark.parametrize("buckets", BUCKETINGS)
@pytest.mark.parametrize("spec, layout, world", CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_propagate_gives_every_shard_its_canonical_values(spec, layout, world, dtype, buckets):
    placement, every = routes(spec, layout, world, buckets)
    weights = values(2)
    masters = []
    for rank in range(world):
        master = torch.full((placement.buffer_size(rank),), float("nan"))
        for region in placement.owned_regions(rank):
            for block in overlap(Region.whole(region.spec), region):
                block.b_view(master).copy_(block.a_view(weights[region.spec.name].reshape(-1)))
        masters.append(master)
    params_of = [[torch.full(shard.shape, float("nan"), dtype=dtype) for shard in route.shards] for route in every]
    for k in range(every[0].buckets):
        outgoing = [route.pack_weights(master, dtype, k) for route, master in zip(every, masters)]
        incoming = exchange(outgoing, [route.received[False][k] for route in every])
        for route, received, params in zip(every, incoming, params_of):
            route.copy_received(received, params, k)
    for route, params in zip(every, params_of):
        for shard, param in zip(route.shards, params):
            assert torch.equal(param, shard.of(weights[shard.name]).to(dtype)), shard.name


@pytest.mark.parametrize("name, spec, devices", [("llama-7b", "1,8,1x8", 64), ("llama-70b", "1,8,4x32", 1024)])
def test_plans_at_scale_hold_kilobytes_not_an_entry_per_element(name, spec, devices):
    model = model_preset(name)
    placement = OptimizerOwnership(model, OptimizerLayout(devices, 1, 1), devices)
    rank_map = RankMap(parse_strategy(spec, model, scheme_times(model, devices), 4096).pipelines, devices)
    for rank in (0, devices // 2 + 1, devices - 1):
        plan = route_plan(placement, rank_map, rank)
        held = sum(shard.spec.numel if shard.dim is None else shard.spec.numel // shard.spec.shape[shard.dim]
                   * shard.length for shard in plan.shards)
        assert sum(plan.sent(False, 0)) == held
        assert sum(plan.received(False, 0)) >= placement.buffer_size(rank) * len(rank_map.pipelines)
        assert plan.nbytes <= 256 * 1024


@pytest.mark.parametrize("spec, layout, world", CASES)
def test_every_holder_numbers_its_buckets_from_zero_and_k_is_the_most_any_cuts(spec, layout, world):
    _, every = routes(spec, layout, world, BUCKETINGS[1])
    own = [set(route.plan.shard_buckets) for route in every]
    assert all(mine == set(range(len(mine))) for mine in own)
    assert {route.buckets for route in every} == {max(map(len, own))} and every[0].buckets > 1


ONE_OWNER = [("1,1,1", (1, 1, 1), 1), ("1,1,4", (1, 1, 4), 4), ("1,1,2", (1, 1, 2), 2)]


@pytest.mark.parametrize("spec, layout, world", ONE_OWNER)
@pytest.mark.parametrize("buckets", BUCKETINGS)
def test_one_owner_copies_in_place_what_the_exchanges_would_deliver(spec, layout, world, buckets):
    placement, every = routes(spec, layout, world, buckets)
    assert all(route.plan.local for route in every)
    grads, weights = values(1), values(2)
    for route in every:
        mine = [shard.of(grads[shard.name]).clone() for shard in route.shards]
        exchanged, copied = (torch.full((placement.buffer_size(route.plan.rank),), float("nan")) for _ in range(2))
        exchanged.zero_()
        for k in range(route.buckets):
            route.add_received(route.pack_gradients(mine, torch.device("cpu"), k), exchanged, k)
        route.gather_local(mine, copied)
        assert torch.equal(copied, exchanged)
        aliased = torch.full_like(copied, float("nan"))
        views = route.aliases(aliased)
        assert views is not None
        for view, grad in zip(views, mine):
            view.copy_(grad)
        assert torch.equal(aliased, exchanged)
        params = [torch.full(shard.shape, float("nan"), dtype=torch.bfloat16) for shard in route.shards]
        master = torch.zeros(placement.buffer_size(route.plan.rank))
        for region in placement.owned_regions(route.plan.rank):
            for block in overlap(Region.whole(region.spec), region):
                block.b_view(master).copy_(block.a_view(weights[region.spec.name].reshape(-1)))
        route.propagate_local(master, params)
        for shard, param in zip(route.shards, params):
            assert torch.equal(param, shard.of(weights[shard.name]).to(torch.bfloat16)), shard.name


@pytest.mark.parametrize("spec, layout, world", CASES)
def test_a_rank_sharing_elements_with_another_is_not_one_owner(spec, layout, world):
    _, every = routes(spec, layout, world)
    assert not all(route.plan.local for route in every)

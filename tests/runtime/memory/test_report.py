"""One memory model: for every preset model and a set of strategies (all on the small presets), each rank's bytes built on
the meta device equal the torch-free accounting, and the cost model predicts them — states
within 2 %, totals within 10 % (an idle owner's without its exchange buffers, which depend on how
many ranks hold its elements: the cost model does not see them)."""

from pathlib import Path

import pytest
import torch

from hydraulis.artifacts.cluster import read_cluster
from hydraulis.base.cluster import ClusterSpaces
from hydraulis.base.presets import device_preset, model_names, model_preset
from hydraulis.base.types import Cluster, OptimizerLayout, Recompute, Scheme
from hydraulis.cost.memory import memory_breakdown
from hydraulis.cost.staged import staged_cost
from hydraulis.job.memory_report import MemoryConfig, capacity_bytes
from hydraulis.job.strategy_spec import parse_strategy, parse_strategy_spec, scheme_times
from hydraulis.profiler.analytic import analytic_memory_model, analytic_profile
from hydraulis.profiler.cluster import group_scheme_space
from hydraulis.runtime.memory.report import memory_report
from hydraulis.runtime.optimizer.routes import Route, route_plan
from hydraulis.runtime.rank_map import RankMap
from hydraulis.sharding.kinds import OptimizerKind, Precision
from hydraulis.sharding.ownership import OptimizerOwnership
from hydraulis.sharding.pipeline import PipelineSplit
from hydraulis.sharding.states import device_precision, held_elements, layer_elements, state_bytes
from hydraulis.sharding.step_memory import communicator_peers, one_owner

ROOT = Path(__file__).resolve().parents[3]
STRATEGIES = ["1,1,1x8", "1,4,1+1,2,2", "2,2,2", "1,4,1[sp]x2", "1,2,2[recompute=full]+1,4,1[sp,recompute=selective]"]
STAGED = [("tiny", "1|2:3>1:1+1|1:1>4:3[recompute=full:1]"), ("llama-7b", "1|4:20>2:12+1,2,1"), ("tiny", "2|2:2>1:2")]
SMALL = ("tiny", "tiny-moe")
# Every strategy and layout on the small presets; each larger preset with one of each in turn (every
# strategy still meets a large model) — building a 405B rank on meta costs seconds, not the point of the test.
LAYOUTS = [None, OptimizerLayout(2, 2, 2)]
CASES = ([(name, spec, layout) for name in SMALL for spec in [*STRATEGIES, *(s for n, s in STAGED if n == name)]
          for layout in LAYOUTS]
         + [(name, STRATEGIES[i % len(STRATEGIES)], LAYOUTS[i % 2])
            for i, name in enumerate(n for n in model_names() if n not in SMALL)]
         + [("tiny", "1,4,2:3/1", None), ("llama-7b", STAGED[1][1], LAYOUTS[1])])


@pytest.mark.parametrize("name, spec, layout", CASES, ids=str)
def test_ranks_equal_the_accounting_and_the_cost_model_predicts_them(name, spec, layout):
    model = model_preset(name)
    config = MemoryConfig(model, spec, 8, "h100-80g", 8, layout, tokens=2048)
    report = memory_report(config)
    state = state_bytes(Precision.BF16, OptimizerKind.ADAM)
    strategy = parse_strategy(spec, model, scheme_times(model, 8), 1)
    rank_map, placement = RankMap(strategy.pipelines, 8), OptimizerOwnership(model, config.layout, 8)
    for rank in report.ranks:
        place = rank_map.place(rank.rank)
        held = 0 if place is None else held_elements(model, strategy.pipelines[place.pipeline], place.stage,
                                                      place.tp_rank)
        assert (rank.weights_bytes, rank.grad_bytes) == (held * state.weight, held * state.grad)
        assert rank.optimizer_bytes == placement.buffer_size(rank.rank) * state.optimizer
        assert rank.states_bytes == pytest.approx(rank.predicted.states, rel=0.02)
        idle = rank.exchange_bytes if place is None else 0
        assert rank.total_bytes - idle == pytest.approx(rank.predicted.total, rel=0.1)


@pytest.mark.parametrize("name, spec", STAGED)
def test_stages_of_their_own_tp_are_predicted_as_the_meter_counts_them(name, spec):
    report = memory_report(MemoryConfig(model_preset(name), spec, 8, "h100-80g", 8, tokens=4096))
    staged = [rank for rank in report.ranks if rank.stage is not None]
    assert len({rank.weights_bytes for rank in staged}) > 1
    for rank in staged:
        assert rank.activation_bytes == pytest.approx(rank.predicted.activations, rel=1e-9)


def test_worked_example_of_the_states_docstring():
    model = model_preset("llama-7b")
    assert layer_elements(model, Scheme(1, 8, 1), 0) == 25_305_088
    assert held_elements(model, PipelineSplit(Scheme(1, 8, 1), (32,)), 0, 3) == 842_534_912


def test_with_a_cluster_each_stage_is_judged_on_its_group_and_holds_what_the_staged_cost_model_says():
    cluster = read_cluster(ROOT / "examples" / "clusters" / "a100_h100.json")
    model = model_preset("llama-13b")
    spec = "1|8:16@a100>8:24@h100+1|8:40@h100"
    report = memory_report(MemoryConfig(model, spec, 32, "a100-80g", 8, cluster=cluster))
    spaces = ClusterSpaces(cluster, tuple(group_scheme_space(g, model, "", "", cps=(1,), tps=(8,), pps=(1, 2))
                                          for g in cluster.groups))
    assert report.tokens == tuple(staged_cost(spaces, g.scheme).max_seq_len for g in parse_strategy_spec(spec))
    a100, h100 = report.groups
    assert (a100.device, h100.device) == ("a100-80g", "h100-80g")
    assert h100.ranks == tuple(range(16, 32)) and a100.ranks == tuple(range(16))
    assert a100.fits and h100.fits and a100.capacity_bytes < h100.capacity_bytes
    for rank in report.ranks:
        idle = rank.exchange_bytes if rank.stage is None else 0
        assert rank.total_bytes - idle == pytest.approx(rank.predicted.total, rel=1e-5)


ONE_OWNER = [("1,1,1", 1, None, True), ("1,1,4", 4, OptimizerLayout(1, 1, 4), True),
             ("1|1:1>1:3", 2, OptimizerLayout(1, 1, 2), False), ("1|1:2>1:2", 2, OptimizerLayout(1, 1, 2), True),
             ("1,1,4", 4, None, False), ("1,1,2", 2, OptimizerLayout(2, 1, 1), False),
             ("1,2,1", 2, OptimizerLayout(1, 2, 1), False), ("1,1,1x2", 2, OptimizerLayout(1, 1, 1), False),
             ("2,1,1", 2, OptimizerLayout(1, 1, 1), False), ("1,1,2", 2, OptimizerLayout(1, 2, 1), False)]


@pytest.mark.parametrize("device", ["h200", "cpu"])
@pytest.mark.parametrize("spec, devices, layout, local", ONE_OWNER)
def test_one_owner_is_predicted_as_the_runtime_routes_it(spec, devices, layout, local, device):
    """Where every rank's route is local (the runtime's RoutePlan decides), the report counts no
    exchange and, under bf16, no main gradients of their own (the runtime's Route.aliases views
    them in the buffer's fp32 gradient); the cost model's prediction agrees, both when it is and
    when it is not."""
    model = model_preset("tiny")
    config = MemoryConfig(model, spec, devices, device, 8, layout, tokens=1024)
    report = memory_report(config)
    strategy = parse_strategy(spec, model, scheme_times(model, devices), 1)
    rank_map, placement = RankMap(strategy.pipelines, devices), OptimizerOwnership(model, config.layout, devices)
    plans = [route_plan(placement, rank_map, rank) for rank in range(devices)]
    assert all(plan.local for plan in plans) is local
    assert one_owner(config.layout, strategy.pipelines[0], devices) is local
    state = state_bytes(device_precision(device), OptimizerKind.ADAM)
    for rank, plan in zip(report.ranks, plans):
        held = held_elements(model, strategy.pipelines[rank.pipeline], rank.stage, rank_map.place(rank.rank).tp_rank)
        aliased = local and state.weight == 2
        if aliased:
            grad = torch.empty(placement.buffer_size(rank.rank), device="meta")
            assert Route(plan, None).aliases(grad) is not None
        assert rank.grad_bytes == (0 if aliased else held * state.grad)
        assert (rank.exchange_bytes == 0) is local and (rank.predicted.exchange == 0) is local
        assert rank.states_bytes == pytest.approx(rank.predicted.states, rel=0.01)
        assert rank.total_bytes - rank.route_bytes == pytest.approx(rank.predicted.total, rel=0.01)


def test_one_device_bf16_holds_weights_workspaces_optimizer_and_activations_only():
    """Llama-7B alone on one H200 (the runtime's one owner): 2 bytes per parameter of weights,
    16 of optimizer states (its fp32 gradient the main gradients), no exchange — 18·P + W + g_max + A."""
    model = model_preset("llama-7b")
    report = memory_report(MemoryConfig(model, "1,1,1[recompute=full]", 1, "h200", 8, tokens=4096, loss_chunk=0))
    (rank,) = report.ranks
    params = held_elements(model, PipelineSplit(Scheme(1, 1, 1), (model.layers,)), 0, 0)
    assert (rank.weights_bytes, rank.grad_bytes, rank.optimizer_bytes) == (2 * params, 0, 16 * params)
    assert rank.exchange_bytes == 0 and rank.predicted.exchange == 0
    assert rank.total_bytes == (18 * params + rank.route_bytes + rank.workspace_bytes + rank.activation_bytes)
    assert rank.total_bytes - rank.route_bytes == pytest.approx(rank.predicted.total, rel=0.01)


@pytest.mark.parametrize("name, spec, scheme, devices", [
    ("tiny", "1,1,1", Scheme(1, 1, 1), 1),
    ("llama-7b", "1,1,1[recompute=full]", Scheme(1, 1, 1, recompute=Recompute.FULL), 1),
    ("llama-7b", "1,2,1", Scheme(1, 2, 1), 2), ("tiny", "2,1,1", Scheme(2, 1, 1), 2)])
@pytest.mark.parametrize("chunk", [0, 1024, 100])
def test_the_planner_prices_a_rank_as_hydraulis_memory_does(name, spec, scheme, devices, chunk):
    """The planner's most loaded device (states, g_max, workspaces, activations or exchange) is
    the report's prediction for the same loss chunks, and the longest sequence it lets a scheme
    hold is the last one that fits the device: the report's default micro-batch."""
    model, device = model_preset(name), device_preset("h200")
    profile = analytic_profile(model, device, Cluster(devices, 8, "h200"), scheme)
    memory = memory_breakdown(analytic_memory_model(model, device), model, profile, OptimizerLayout(devices, 1, 1),
                              devices, chunk)
    report = memory_report(MemoryConfig(model, spec, devices, "h200", 8, tokens=4096, loss_chunk=chunk))
    planner = memory.states + memory.gradient + device.workspace_bytes + max(memory.activation_bytes(4096),
                                                                            memory.exchange)
    assert planner == pytest.approx(report.max_predicted_bytes, rel=1e-6)
    longest = memory.max_seq_len
    assert memory.headroom_bytes(longest) >= 0 > memory.headroom_bytes(longest + 1)
    held = memory_report(MemoryConfig(model, spec, devices, "h200", 8, loss_chunk=chunk))
    assert held.tokens == (longest,) * len(held.tokens)
    assert held.max_predicted_bytes <= held.capacity_bytes
    outside = max(rank.communicator_bytes for rank in report.ranks)
    assert memory.communicators == outside == (0 if devices == 1 else 2 * 16 * 4 * 2**20)


def test_communicators_count_a_ring_per_group_and_a_peer_per_neighbouring_stage():
    assert communicator_peers(Scheme(1, 8, 2), 0, 64) == 5
    assert communicator_peers(Scheme(2, 2, 3), 1, 12) == 2 + 1 + 1 + 2
    assert communicator_peers(Scheme(1, 1, 1), 0, 1) == 0
    assert communicator_peers(None, 0, 2) == 1
    report = memory_report(MemoryConfig(model_preset("tiny"), "1,2,2", 8, "h100-80g", 8, tokens=512))
    idle = [rank for rank in report.ranks if rank.stage is None]
    assert {rank.communicator_bytes for rank in idle} == {2 * 64 * 2**20}
    assert max(rank.communicator_bytes for rank in report.ranks) == (2 + 1 + 1) * 64 * 2**20
    assert report.capacity_bytes == capacity_bytes("h100-80g") - 4 * 64 * 2**20


def test_chunks_let_the_planner_hold_longer_sequences_than_the_whole_loss():
    model, device = model_preset("llama-7b"), device_preset("h200")
    profile = analytic_profile(model, device, Cluster(1, 8, "h200"), Scheme(1, 1, 1, recompute=Recompute.FULL))
    whole, chunked = (memory_breakdown(analytic_memory_model(model, device), model, profile, OptimizerLayout(1, 1, 1),
                                       1, chunk) for chunk in (0, 1024))
    assert chunked.max_seq_len > whole.max_seq_len
    assert chunked.activation_bytes(4096) < whole.activation_bytes(4096)

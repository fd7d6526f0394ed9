"""The per-pipeline split: the dynamic program against brute force over every composition."""

import itertools

import pytest

from hydraulis.base.cluster import ClusterDescription, ClusterSpaces, DeviceGroup, GroupLink
from hydraulis.base.stages import Stage
from hydraulis.base.types import ModelSpec, Scheme
from hydraulis.cost.staged import staged_cost
from hydraulis.planner.split import GroupBudget, SplitRequest, candidate_stages, split_options, split_pipeline
from hydraulis.profiler.cluster import group_scheme_space
from tests.conftest import mixed_cluster_spaces

EIGHT_LAYERS = ModelSpec("m8", 8, 5120, 40, 40, 13824, 32000)


@pytest.fixture(scope="module")
def small_spaces():
    cluster = ClusterDescription((DeviceGroup("a", "a100-80g", 1, 8), DeviceGroup("h", "h100-80g", 1, 8)),
                                 (GroupLink("a", "h", 25.0),))
    return ClusterSpaces(cluster, tuple(group_scheme_space(g, EIGHT_LAYERS, "t", "t", tps=(1, 2, 4), pps=(1,))
                                        for g in cluster.groups))


def brute_force(spaces, request):
    """The least bottleneck over every tp choice and every composition of the layers."""
    best = None
    layers = spaces.model.layers
    for stages in candidate_stages(spaces, request):
        pp = len(stages)
        for cuts in itertools.combinations(range(1, layers), pp - 1):
            counts = [b - a for a, b in zip((0, *cuts), (*cuts, layers))]
            scheme = Scheme.staged(request.cp, tuple(Stage(s.tp, n, s.group) for s, n in zip(stages, counts)))
            cost = staged_cost(spaces, scheme)
            if cost.max_seq_len < request.target:
                continue
            value = max(t.c + t.a * request.target ** 2 + t.b * request.target for t in cost.stage_times)
            best = value if best is None else min(best, value)
    return best


@pytest.mark.parametrize("order", [("a", "h"), ("h", "a")])
@pytest.mark.parametrize("target", [4096, 16384, 32768, 65536, 81920, 98304])
def test_dynamic_program_matches_brute_force(small_spaces, order, target):
    request = SplitRequest(1, tuple(GroupBudget(g, 4) for g in order), target, tps=(1, 2, 4))
    expected = brute_force(small_spaces, request)
    found = split_pipeline(small_spaces, request)
    if expected is None:
        assert found is None
        return
    assert found.bottleneck_ms == pytest.approx(expected, rel=1e-12)
    cost = staged_cost(small_spaces, found.scheme)
    assert cost.max_seq_len >= target and sum(found.scheme.stage_layers(8)) == 8
    assert [s.group for s in found.scheme.stages] == sorted((s.group for s in found.scheme.stages), key=order.index)


def test_pareto_front_and_worked_example():
    spaces = mixed_cluster_spaces()
    request = SplitRequest(1, (GroupBudget("a100", 8), GroupBudget("h100", 8)), 8192, tps=(8,))
    assert str(split_pipeline(spaces, request).scheme) == "(1|8:13@a100>8:27@h100)"
    front = split_options(spaces, SplitRequest(1, request.budgets, 8192))
    assert [s.scheme.pp for s in front] == sorted({s.scheme.pp for s in front})
    assert all(b.bottleneck_ms < a.bottleneck_ms for a, b in zip(front, front[1:]))

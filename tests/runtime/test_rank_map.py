"""The rank map: the worked example, and invariants over random strategies."""

from hypothesis import given
from hypothesis import strategies as st

from hydraulis.base.errors import HydraulisError
from hydraulis.base.placement import RankRange
from hydraulis.base.stages import Stage, even_split
from hydraulis.base.types import Scheme
from hydraulis.runtime.rank_map import GroupCache, GroupKind, HandOff, ProcessGroups, RankMap, RankPlace
from hydraulis.sharding.pipeline import PipelineSplit


def layout(cp, tp, pp):
    return PipelineSplit(Scheme(cp, tp, pp), even_split(8, pp))


def test_worked_example():
    rank_map = RankMap((layout(1, 2, 1), layout(1, 1, 2)), 4)
    assert [rank_map.place(r) for r in range(4)] == [
        RankPlace(0, 0, 0, 0), RankPlace(0, 0, 0, 1), RankPlace(1, 0, 0, 0), RankPlace(1, 1, 0, 0)]
    assert rank_map.tp_ranks(0, 0, 0) == (0, 1)
    assert rank_map.hand_off(RankPlace(1, 0, 0, 0)) == HandOff(None, (), 3, (3,))
    assert rank_map.hand_off(RankPlace(1, 1, 0, 0)) == HandOff(2, (2,), None, ())


def staged(cp, *stages):
    return PipelineSplit(Scheme.staged(cp, tuple(Stage(tp, layers) for tp, layers in stages)),
                          tuple(layers for _, layers in stages))


def test_worked_example_of_per_stage_tp():
    rank_map = RankMap((staged(1, (2, 3), (1, 1)), layout(1, 1, 1)), 4)
    assert [rank_map.place(r) for r in range(4)] == [
        RankPlace(0, 0, 0, 0), RankPlace(0, 0, 0, 1), RankPlace(0, 1, 0, 0), RankPlace(1, 0, 0, 0)]
    assert rank_map.stage_ranks(0, 1) == (2,) and rank_map.tp_ranks(0, 0, 0) == (0, 1)
    cp = RankMap((staged(2, (1, 2), (2, 2)),), 6)
    assert [cp.place(r) for r in range(6)] == [
        RankPlace(0, 0, 0, 0), RankPlace(0, 0, 1, 0), RankPlace(0, 1, 0, 0), RankPlace(0, 1, 0, 1),
        RankPlace(0, 1, 1, 0), RankPlace(0, 1, 1, 1)]
    assert cp.stage_start(0, 1) == 2 and cp.cp_ranks(0, 1, 1) == (3, 5) and cp.tp_ranks(0, 1, 1) == (4, 5)


def test_larger_pipelines_come_first_at_aligned_offsets():
    rank_map = RankMap((layout(1, 1, 1), layout(1, 2, 1)), 3)
    assert rank_map.offsets == (2, 0)
    assert [rank_map.place(r) for r in range(3)] == [RankPlace(1, 0, 0, 0), RankPlace(1, 0, 0, 1), RankPlace(0, 0, 0, 0)]


def test_ranks_beyond_the_strategy_are_idle():
    rank_map = RankMap((layout(1, 1, 1),), 3)
    assert rank_map.place(0) == RankPlace(0, 0, 0, 0)
    assert rank_map.place(1) is None and rank_map.place(2) is None


plain = st.builds(Scheme, st.integers(1, 3), st.integers(1, 3), st.integers(1, 3))
per_stage = st.builds(lambda cp, tps: Scheme.staged(cp, tuple(Stage(tp, 1) for tp in tps)),
                      st.integers(1, 3), st.lists(st.integers(1, 4), min_size=1, max_size=4))
schemes = st.one_of(plain, per_stage)


@given(st.lists(schemes, min_size=1, max_size=4))
def test_places_and_groups_partition_the_ranks(scheme_list):
    pipelines = tuple(PipelineSplit(s, s.stage_layers(s.pp) if s.is_staged else even_split(8, s.pp))
                      for s in scheme_list)
    world = sum(s.devices for s in scheme_list)
    rank_map = RankMap(pipelines, world)
    for rank in range(world):
        place = rank_map.place(rank)
        assert rank_map.rank(place) == rank
        assert rank in rank_map.tp_ranks(place.pipeline, place.stage, place.cp_rank)
        assert rank in rank_map.cp_ranks(place.pipeline, place.stage, place.tp_rank)
        assert rank in rank_map.stage_ranks(place.pipeline, place.stage)
        assert len(rank_map.tp_ranks(place.pipeline, place.stage, place.cp_rank)) == \
            pipelines[place.pipeline].scheme.stage_tp(place.stage)
    sets = {}
    for kind, ranks in rank_map.group_rank_sets():
        sets.setdefault(kind, []).extend(ranks)
    for kind in GroupKind:
        assert sorted(sets[kind]) == list(range(world)), kind


def test_every_rank_creates_the_same_groups_in_the_same_order():
    rank_map = RankMap((layout(2, 2, 1), layout(1, 2, 2)), 8)
    calls = {}
    for rank in range(8):
        made = []
        ProcessGroups.create(rank_map, rank, GroupCache(lambda ranks: made.append(tuple(ranks)) or tuple(ranks)))
        calls[rank] = made
    assert all(made == calls[0] for made in calls.values())
    groups = ProcessGroups.create(rank_map, 5, GroupCache(lambda ranks: tuple(ranks)))
    assert (groups.tp.group, groups.tp.rank) == ((4, 5), 1)
    assert groups.cp.trivial


def test_groups_are_created_once_per_rank_set_whatever_the_strategy():
    made = []
    cache = GroupCache(lambda ranks: made.append(tuple(ranks)) or tuple(ranks))
    strategies = [(layout(1, 2, 1), layout(1, 2, 1)), (layout(1, 2, 2),), (layout(2, 2, 1),), (layout(1, 2, 1),)]
    counts = []
    for pipelines in strategies + strategies:
        ProcessGroups.create(RankMap(pipelines, 4), 0, cache)
        counts.append(cache.created)
    assert counts == [2, 2, 4, 4] + [4] * 4
    assert len(made) == len(set(made)) == 4


def test_stages_of_a_mixed_cluster_run_on_their_groups_ranks():
    cross = PipelineSplit(Scheme.staged(1, (Stage(8, 16, "a100"), Stage(8, 24, "h100"))), (16, 24))
    rank_map = RankMap((cross, cross), 32, (RankRange("a100", 0, 16), RankRange("h100", 16, 16)))
    assert rank_map.stage_ranks(0, 1) + rank_map.stage_ranks(1, 1) == tuple(range(16, 32))
    assert rank_map.stage_ranks(1, 0) == tuple(range(8, 16))
    assert rank_map.pipeline_ranks(1) == tuple(range(8, 16)) + tuple(range(24, 32))
    assert rank_map.place(9) == RankPlace(1, 0, 0, 1) and rank_map.place(25) == RankPlace(1, 1, 0, 1)
    assert rank_map.hand_off(RankPlace(1, 0, 0, 1)) == HandOff(None, (), 25, (25,))
    assert rank_map.hand_off(RankPlace(1, 1, 0, 1)) == HandOff(9, (9,), None, ())
    tp_sets = [ranks for kind, ranks in rank_map.group_rank_sets() if kind == GroupKind.TP]
    assert tp_sets == [tuple(range(start, start + 8)) for start in (0, 16, 8, 24)]


def test_a_cluster_must_hold_the_world():
    try:
        RankMap((layout(1, 1, 1),), 3, (RankRange("a", 0, 2),))
    except HydraulisError as error:
        assert "world_size" in str(error) and "2 devices" in str(error)
    else:
        raise AssertionError("a world of 3 on a cluster of 2")

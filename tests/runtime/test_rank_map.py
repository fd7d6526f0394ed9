"""The rank map: the worked example, and invariants over random strategies."""

from hypothesis import given
from hypothesis import strategies as st

from hydraulis.runtime.layout import PipelineLayout, even_split
from hydraulis.runtime.rank_map import GroupCache, GroupKind, ProcessGroups, RankMap, RankPlace
from hydraulis.types import Scheme


def layout(cp, tp, pp):
    return PipelineLayout(Scheme(cp, tp, pp), even_split(8, pp))


def test_worked_example():
    rank_map = RankMap((layout(1, 2, 1), layout(1, 1, 2)), 4)
    assert [rank_map.place(r) for r in range(4)] == [
        RankPlace(0, 0, 0, 0), RankPlace(0, 0, 0, 1), RankPlace(1, 0, 0, 0), RankPlace(1, 1, 0, 0)]
    assert rank_map.tp_ranks(0, 0, 0) == (0, 1)
    assert rank_map.neighbour(RankPlace(1, 0, 0, 0), 1) == 3
    assert rank_map.neighbour(RankPlace(1, 1, 0, 0), 1) is None


def test_larger_pipelines_come_first_at_aligned_offsets():
    rank_map = RankMap((layout(1, 1, 1), layout(1, 2, 1)), 3)
    assert rank_map.offsets == (2, 0)
    assert [rank_map.place(r) for r in range(3)] == [RankPlace(1, 0, 0, 0), RankPlace(1, 0, 0, 1), RankPlace(0, 0, 0, 0)]


def test_ranks_beyond_the_strategy_are_idle():
    rank_map = RankMap((layout(1, 1, 1),), 3)
    assert rank_map.place(0) == RankPlace(0, 0, 0, 0)
    assert rank_map.place(1) is None and rank_map.place(2) is None


schemes = st.builds(Scheme, st.integers(1, 3), st.integers(1, 3), st.integers(1, 3))


@given(st.lists(schemes, min_size=1, max_size=4))
def test_places_and_groups_partition_the_ranks(scheme_list):
    pipelines = tuple(PipelineLayout(s, even_split(8, s.pp)) for s in scheme_list)
    world = sum(s.devices for s in scheme_list)
    rank_map = RankMap(pipelines, world)
    for rank in range(world):
        place = rank_map.place(rank)
        assert rank_map.rank(place) == rank
        assert rank in rank_map.tp_ranks(place.pipeline, place.stage, place.cp_rank)
        assert rank in rank_map.cp_ranks(place.pipeline, place.stage, place.tp_rank)
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

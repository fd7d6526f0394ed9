"""Aligned placement and communicators: worked examples, alignment and the bound (property
tests over random strategies)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from hydraulis.base.errors import HydraulisError
from hydraulis.base.placement import (
    Communicator,
    CommunicatorKind,
    RankRange,
    communicator_bound,
    communicators,
    pipeline_offsets,
    placement_problem,
    stage_offsets,
)
from hydraulis.base.stages import Stage, parse_stages
from hydraulis.base.types import Scheme

GROUP, PAIR = CommunicatorKind.GROUP, CommunicatorKind.PAIR


def test_worked_examples():
    assert pipeline_offsets([4, 2, 2]) == (0, 4, 6)
    assert communicators([Scheme(1, 4, 1), Scheme(1, 2, 1), Scheme(1, 2, 1)]) == {
        Communicator(GROUP, (0, 1, 2, 3)), Communicator(GROUP, (4, 5)), Communicator(GROUP, (6, 7))}
    assert communicators([Scheme(1, 2, 2), Scheme(1, 1, 2), Scheme(1, 1, 2)]) == {
        Communicator(GROUP, (0, 1)), Communicator(GROUP, (2, 3)), Communicator(PAIR, (0, 2)),
        Communicator(PAIR, (1, 3)), Communicator(PAIR, (4, 5)), Communicator(PAIR, (6, 7))}


def test_largest_first_ties_in_order_and_cp_groups_stride_over_tp():
    assert pipeline_offsets([2, 8, 2, 4]) == (12, 0, 14, 8)
    assert Communicator(GROUP, (0, 2)) in communicators([Scheme(2, 2, 1)])


def test_placement_problems_are_named():
    assert placement_problem([8, 4, 4], 16, 8) == ""
    assert "12 devices needed" in placement_problem([8, 4], 8, 8)
    assert "straddles nodes of 8" in placement_problem([6, 6], 16, 8)


powers = st.sampled_from([1, 2, 4, 8])
schemes = st.builds(Scheme, powers, powers, st.sampled_from([1, 2, 4]))


@settings(max_examples=150, deadline=None)
@given(strategies=st.lists(st.lists(schemes, min_size=1, max_size=6), min_size=1, max_size=5),
       nodes=st.integers(1, 8))
def test_aligned_offsets_and_the_run_bound(strategies, nodes):
    """Pipelines of 2^k devices start at multiples of their size, inside a node or on whole
    nodes; whatever strategies a run uses, its distinct communicators stay within the bound."""
    devices = 8 * nodes
    seen: set[Communicator] = set()
    used: set[Scheme] = set()
    for strategy in strategies:
        sizes = [s.devices for s in strategy]
        if sum(sizes) > devices:
            continue
        for size, offset in zip(sizes, pipeline_offsets(sizes)):
            assert offset % size == 0 and offset + size <= devices
        assert placement_problem(sizes, devices, 8) == ""
        seen |= communicators(strategy)
        used |= set(strategy)
    assert len(seen) <= communicator_bound(used, devices)


A100_H100 = (RankRange("a100", 0, 16), RankRange("h100", 16, 16))


def test_stages_sit_in_their_groups_ranks():
    cross = Scheme.staged(1, (Stage(8, 16, "a100"), Stage(8, 24, "h100")))
    assert stage_offsets([cross, cross], A100_H100) == ((0, 16), (8, 24))
    plain = Scheme(1, 2, 2)
    assert stage_offsets([plain, Scheme.staged(1, (Stage(4, 1, "h100"), Stage(2, 1)))], A100_H100) == ((0, 2), (16, 4))


def test_one_group_places_as_pipeline_offsets():
    schemes = [Scheme(1, 1, 2), Scheme(1, 2, 2), Scheme.staged(1, (Stage(2, 1), Stage(1, 1)))]
    offsets = pipeline_offsets([s.devices for s in schemes])
    assert [starts[0] for starts in stage_offsets(schemes, (RankRange("cpu", 0, 9),))] == list(offsets)


def test_a_group_too_small_is_refused_naming_the_strategy_and_the_group():
    cross = Scheme.staged(1, (Stage(8, 16, "a100"), Stage(8, 24, "h100")))
    try:
        stage_offsets([cross] * 3, A100_H100)
    except HydraulisError as error:
        assert "1|8:16@a100>8:24@h100" in str(error) and "group a100, which has 16" in str(error)
    else:
        raise AssertionError("placed 24 devices in a group of 16")


group_names = st.sampled_from(["", "a", "b"])
staged_on_groups = st.builds(lambda cp, stages: Scheme.staged(cp, tuple(Stage(tp, 1, g) for tp, g in stages)),
                             st.integers(1, 2), st.lists(st.tuples(st.integers(1, 3), group_names), min_size=1, max_size=3))


@given(st.lists(st.one_of(staged_on_groups, st.builds(Scheme, st.integers(1, 2), st.integers(1, 2), st.integers(1, 2))),
                min_size=1, max_size=4), st.integers(0, 3))
def test_every_rank_is_used_once_and_every_stage_lies_in_its_group(schemes, spare):
    need = {"a": 0, "b": 0}
    for scheme in schemes:
        for stage in range(scheme.pp):
            group = (scheme.stages[stage].group if scheme.is_staged else "") or "a"
            need[group] += scheme.cp * scheme.stage_tp(stage)
    groups = (RankRange("a", 0, need["a"] + spare), RankRange("b", need["a"] + spare, need["b"]))
    used = []
    for scheme, starts in zip(schemes, stage_offsets(schemes, groups)):
        for stage, start in enumerate(starts):
            size = scheme.cp * scheme.stage_tp(stage)
            group = groups[1] if scheme.is_staged and scheme.stages[stage].group == "b" else groups[0]
            assert group.start <= start and start + size <= group.start + group.size
            used.extend(range(start, start + size))
    assert len(used) == len(set(used))


def test_a_staged_pipeline_counts_its_stages_own_groups_and_hand_off_pairs():
    scheme = Scheme.staged(*parse_stages("1|2:2>1:2"))
    found = communicators([scheme])
    assert {c.ranks for c in found if c.kind is CommunicatorKind.GROUP} == {(0, 1)}
    assert {c.ranks for c in found if c.kind is CommunicatorKind.PAIR} == {(0, 2), (1, 2)}
    assert communicator_bound([scheme], 3) == len(found) == 3
    wide = Scheme.staged(*parse_stages("2|1:1>2:3"))
    assert len(communicators([wide, wide])) <= communicator_bound([wide], 12)

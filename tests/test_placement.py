"""Aligned placement and communicators: worked examples, alignment and the bound (property
tests over random strategies)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from hydraulis.placement import (
    Communicator,
    CommunicatorKind,
    communicator_bound,
    communicators,
    pipeline_offsets,
    placement_problem,
)
from hydraulis.types import Scheme

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

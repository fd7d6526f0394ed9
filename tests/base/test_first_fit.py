"""First-fit over the tree of rooms, runs of short pieces included, is the linear scan."""

from hypothesis import given, settings
from hypothesis import strategies as st

from hydraulis.base.first_fit import first_fit_tree


def linear_first_fit(sizes, capacity):
    """The oracle: each piece, in order, into the first micro-batch with room (a new one if none)."""
    rooms, bins = [], []
    for k, s in enumerate(sizes):
        j = next((j for j, room in enumerate(rooms) if s <= room), len(rooms))
        if j == len(rooms):
            rooms.append(capacity)
            bins.append([])
        rooms[j] -= s
        bins[j].append(k)
    return bins


@given(st.lists(st.integers(0, 12), min_size=1, max_size=400), st.lists(st.integers(13, 90), max_size=20),
       st.integers(1, 60))
@settings(max_examples=300, deadline=None)
def test_runs_of_short_and_equal_pieces_pack_as_the_linear_scan(short, long, capacity):
    sizes = sorted(short + long, reverse=True)
    assert first_fit_tree(sizes, capacity) == linear_first_fit(sizes, capacity)


def test_the_worked_example():
    assert first_fit_tree([6, 5, 2, 2, 2, 1], 10) == [[0, 2, 3], [1, 4, 5]]

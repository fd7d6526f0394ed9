from hypothesis import given
from hypothesis import strategies as st

from hydraulis.job.overlap import covered, length, rank_overlap, union

_SPAN = st.tuples(st.integers(0, 60), st.integers(0, 60)).map(sorted).map(tuple)
_SPANS = st.lists(_SPAN, max_size=6)


def test_worked_example():
    ranks = [rank_overlap([(10, 14), (12, 20)], [(0, 11), (15, 16)]), rank_overlap([(30, 40)], [(0, 30)])]
    assert ranks == [(10, 2.0), (10, 0.0)]
    assert (sum(r[0] for r in ranks), sum(r[1] for r in ranks)) == (20, 2.0)


def _grid(spans) -> set[int]:
    """The unit cells [t, t + 1) covered by integer ``spans``."""
    return {t for a, b in spans for t in range(a, b)}


@given(_SPANS, _SPANS)
def test_measures_equal_counting_unit_cells(buckets, backwards):
    in_flight, hidden = rank_overlap(buckets, backwards)
    assert in_flight == len(_grid(buckets)) == length(buckets)
    assert hidden == len(_grid(buckets) & _grid(backwards)) == covered(buckets, backwards)
    assert 0 <= hidden <= in_flight
    assert all(a < b for a, b in union(buckets))


@given(st.lists(st.tuples(_SPANS, _SPANS), max_size=4))
def test_a_reduction_issued_after_its_own_backwards_hides_nothing(ranks):
    """The overlap off: each rank's buckets fly after its own last backward, whatever the other
    ranks compute meanwhile."""
    measured = []
    for buckets, backwards in ranks:
        end = max((b for _, b in backwards), default=0)
        measured.append(rank_overlap([(end + a, end + b) for a, b in buckets], backwards))
    assert sum(hidden for _, hidden in measured) == 0
    assert sum(in_flight for in_flight, _ in measured) == sum(length(buckets) for buckets, _ in ranks)

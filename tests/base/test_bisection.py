"""The one bisection: its worked example, and the bracket it returns around any threshold."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hydraulis.base.bisection import threshold_bracket


def test_worked_example_of_the_docstring():
    assert threshold_bracket(lambda x: x >= 3, 1.0, halvings=2) == (2.5, 3.0)


@given(st.floats(0.01, 1e6), st.floats(0.001, 0.009), st.integers(0, 60))
def test_the_bracket_holds_the_threshold_and_shrinks_by_halves(threshold, start, halvings):
    lo, hi = threshold_bracket(lambda x: x >= threshold, start, halvings=halvings)
    assert lo < threshold <= hi
    given_hi = threshold_bracket(lambda x: x >= threshold, 0.0, 2 * threshold, halvings)
    assert given_hi[1] - given_hi[0] == pytest.approx(2 * threshold * 0.5**halvings, abs=4 * math.ulp(2 * threshold))

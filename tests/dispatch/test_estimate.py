"""Stage 1's estimate: the many-pipeline form equals the one-pipeline form bit for bit."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hydraulis.dispatch.estimate import estimate_many, estimate_ms

pipelines = st.lists(st.tuples(st.floats(0.0, 1e5), st.integers(0, 200_000), st.floats(0.0, 1e4),
                               st.integers(0, 300)), min_size=1, max_size=20)


@given(pipelines, st.floats(0.0, 50.0), st.integers(1, 16), st.integers(1, 140_000), st.floats(0.05, 1.0),
       st.floats(0.0, 1.0))
@settings(max_examples=200, deadline=None)
def test_many_pipelines_at_once_equal_one_at_a_time(rows, c, pp, capacity, kappa, p2p):
    work, tokens, longest, pieces = (np.array(column) for column in zip(*rows))
    many = estimate_many(work, tokens.astype(np.int64), longest, pieces.astype(np.int64), c, pp, capacity, kappa, p2p)
    one = [estimate_ms(float(w), int(n), float(m), int(k), c, pp, capacity, kappa, p2p)[0]
           for w, n, m, k in rows]
    assert many.tolist() == one

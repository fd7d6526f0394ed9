"""A point's time from its samples: each micro-batch's slowest rank, then the statistic."""

import numpy as np
import pytest

from hydraulis.base.types import Scheme
from hydraulis.profiler.sweep import Statistic, SweepPoint
from hydraulis.runtime.profiling.measure import _summary

POINT = SweepPoint(Scheme(1, 2, 1), 1, (64,))
# timed[rank, micro-batch] = (forward, backward) ms: two ranks, four micro-batches (two runs of two)
TIMED = np.array([[[1.0, 2.0], [1.0, 1.5], [4.0, 4.0], [2.0, 3.0]],
                  [[2.0, 2.0], [0.5, 1.0], [1.0, 1.0], [1.0, 3.5]]])


@pytest.mark.parametrize("statistic, time, forward", [(Statistic.MIN, 2.5, 1.0), (Statistic.MEDIAN, 4.0, 2.0)])
def test_each_sample_is_its_slowest_rank_and_the_statistic_picks_one(statistic, time, forward):
    measured = _summary(POINT, TIMED, 1e6, 0.5, statistic)
    assert measured.samples_ms == (4.0, 2.5, 8.0, 5.0)
    assert (measured.time_ms, measured.forward_ms) == (time, forward)
    assert measured.activation_bytes == 1e6 and measured.wall_s == 0.5

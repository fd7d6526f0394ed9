"""The pipeline hand-off ``d`` from a run's operations and makespan: the worked example, the
replay at the ``d`` found ends at the makespan (the oracle), and no hand-off below the replay."""

import numpy as np
import pytest

from hydraulis.base.errors import HydraulisError
from hydraulis.cost.pipeline import simulate_1f1b_phases
from hydraulis.profiler.handoff import handoff_ms, point_handoff


def test_the_worked_example():
    assert handoff_ms([[1.0], [1.0]], [[2.0], [2.0]], 8.0) == pytest.approx(1.0)


@pytest.mark.parametrize("seed", range(20))
def test_the_replay_at_the_handoff_found_ends_at_the_makespan(seed):
    rng = np.random.default_rng(seed)
    pp, v = int(rng.integers(2, 5)), int(rng.integers(1, 7))
    forward, backward = rng.uniform(1, 10, (pp, v)).tolist(), rng.uniform(1, 20, (pp, v)).tolist()
    makespan = simulate_1f1b_phases(forward, backward, float(rng.uniform(0.1, 5))).makespan_ms
    d = handoff_ms(forward, backward, makespan)
    assert simulate_1f1b_phases(forward, backward, d).makespan_ms == pytest.approx(makespan, rel=1e-9)


def test_a_makespan_the_operations_alone_explain_is_no_handoff():
    forward, backward = [[2.0, 3.0], [2.0, 3.0]], [[4.0, 6.0], [4.0, 6.0]]
    assert handoff_ms(forward, backward, simulate_1f1b_phases(forward, backward, 0.0).makespan_ms - 1.0) == 0.0


def test_one_stage_has_no_handoff():
    with pytest.raises(HydraulisError, match="stages"):
        handoff_ms([[1.0]], [[2.0]], 3.0)


def test_a_profile_points_handoff_is_the_median_over_its_runs_of_the_slowest_ranks_per_stage():
    """Ranks 0 and 1 are stage 0 and 1 of one pipeline, rank 2 stage 0 of a replica (slower
    forwards), rank 3 outside; two runs of one micro-batch: f = (2, 1), b = (2, 2); the makespans
    10 and 12 ms imply d = 1.5 and 2.5 ms."""
    samples = np.array([[[1.0, 2.0], [1.0, 2.0]], [[1.0, 2.0], [1.0, 2.0]], [[2.0, 1.0], [2.0, 1.0]],
                        [[0.0, 0.0], [0.0, 0.0]]])
    makespans = np.array([[9.0, 12.0], [8.0, 9.0], [10.0, 11.0], [0.0, 0.0]])
    assert point_handoff(samples, makespans, np.array([0, 1, 0, -1]), 2) == pytest.approx(2.0)

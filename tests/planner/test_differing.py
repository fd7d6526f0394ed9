"""What each kept strategy gains on the steps it is best on (planner/differing.py)."""

import numpy as np

from hydraulis.base.types import PipelineGroup, Scheme, Strategy, TimeCoefficients
from hydraulis.planner.differing import gains

TIME = TimeCoefficients(0.0, 1.0, 0.0)
A, B, C = (Strategy((PipelineGroup(Scheme(1, tp, 1), 1, 64, TIME),)) for tp in (1, 2, 4))
TIMES = {A: [100.0, 100.0, 300.0, 100.0], B: [150.0, 120.0, 200.0, 90.0], C: [np.inf, 200.0, 250.0, 99.0]}


def judged(strategy: Strategy, steps) -> list[float]:
    return [TIMES[strategy][i] for i in steps]


def test_worked_example_each_strategy_is_best_on_its_steps_and_gains_over_the_next_best():
    """A is best on steps 0 and 1 (B, next best, would add 50 % and 20 %), B on steps 2 and 3 (C,
    next best on both, would add 25 % and 10 %), C on none."""
    (a_steps, a_gain, a_next), (b_steps, b_gain, b_next), (c_steps, c_gain, c_next) = gains([A, B, C], judged, 4)
    assert a_steps.tolist() == [0, 1] and np.isclose(a_gain, (0.5 + 0.2) / 2) and a_next == 1
    assert b_steps.tolist() == [2, 3] and np.isclose(b_gain, (250 / 200 - 1 + 99 / 90 - 1) / 2) and b_next == 2
    assert c_steps.size == 0 and c_gain == 0.0 and c_next == -1


def test_a_single_strategy_has_no_runner_up():
    (steps, gain, runner_up), = gains([B], judged, 4)
    assert steps.tolist() == [0, 1, 2, 3] and gain == 0.0 and runner_up == -1

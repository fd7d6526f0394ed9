"""The one 1F1B order: the docstring's example, its invariants, and the positions the fused
baselines sort by agreeing with it."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from hydraulis.cost.order import Phase, one_f_one_b, one_f_one_b_position


def test_worked_example_of_the_order_docstring():
    assert " ".join(map(str, one_f_one_b(3, 2, 0))) == "F0 F1 B0 F2 B1 B2"
    assert " ".join(map(str, one_f_one_b(3, 2, 1))) == "F0 B0 F1 B1 F2 B2"


@given(st.integers(0, 12), st.integers(1, 6), st.data())
def test_every_micro_batch_runs_forward_then_backward_with_at_most_pp_minus_stage_in_flight(v, pp, data):
    stage = data.draw(st.integers(0, pp - 1))
    schedule = one_f_one_b(v, pp, stage)
    forwards = [op.micro_batch for op in schedule if op.phase is Phase.FORWARD]
    backwards = [op.micro_batch for op in schedule if op.phase is Phase.BACKWARD]
    assert forwards == backwards == list(range(v))
    in_flight = 0
    for op in schedule:
        in_flight += 1 if op.phase is Phase.FORWARD else -1
        assert 0 <= in_flight <= pp - stage


@given(st.integers(1, 12), st.integers(1, 6), st.data())
def test_positions_are_a_permutation_in_the_order(v, pp, data):
    stage = data.draw(st.integers(0, pp - 1))
    schedule = one_f_one_b(v, pp, stage)
    positions = [int(one_f_one_b_position(stage, pp, v, op.micro_batch, op.phase is Phase.FORWARD)) for op in schedule]
    assert positions == list(range(2 * v))
    j = np.array([op.micro_batch for op in schedule])
    forward = np.array([op.phase is Phase.FORWARD for op in schedule])
    assert list(one_f_one_b_position(stage, pp, v, j, forward)) == positions

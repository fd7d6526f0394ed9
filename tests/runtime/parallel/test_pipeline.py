"""The 1F1B schedule as a list of operations: the docstring's example and its invariants."""

from hypothesis import given
from hypothesis import strategies as st

from hydraulis.runtime.parallel.pipeline import Action, one_f_one_b


def test_worked_example_of_the_pipeline_docstring():
    assert " ".join(map(str, one_f_one_b(3, 2, 0))) == "F0 F1 B0 F2 B1 B2"
    assert " ".join(map(str, one_f_one_b(3, 2, 1))) == "F0 B0 F1 B1 F2 B2"


@given(st.integers(0, 12), st.integers(1, 6), st.data())
def test_every_micro_batch_runs_forward_then_backward_with_at_most_pp_minus_stage_in_flight(v, pp, data):
    stage = data.draw(st.integers(0, pp - 1))
    schedule = one_f_one_b(v, pp, stage)
    forwards = [op.micro_batch for op in schedule if op.action is Action.FORWARD]
    backwards = [op.micro_batch for op in schedule if op.action is Action.BACKWARD]
    assert forwards == backwards == list(range(v))
    in_flight = 0
    for op in schedule:
        in_flight += 1 if op.action is Action.FORWARD else -1
        assert 0 <= in_flight <= pp - stage

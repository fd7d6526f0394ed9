"""The gap breakdown adds up to the predicted step time, term by term."""

import pytest

from hydraulis.artifacts import read_lengths
from hydraulis.base.workload import sample_batches
from hydraulis.dispatch import dispatch
from hydraulis.dispatch.gap import bound_schemes, gap_breakdown
from hydraulis.dispatch.synthesis import plan_step
from tests.dispatch.helpers import EXAMPLES, example_proposal, group, proposal


def test_worked_example():
    """Two (1,1,1) pipelines, w(s) = s, c = 1, pieces 3 and 1 on N = 2: work 2, fixed 1,
    imbalance 1: 4 ms, the slower pipeline."""
    prop = proposal((group(pp=1, count=2, capacity=10, a=0.0, b=1.0, c=1.0),))
    plan = dispatch(prop, [3, 1])
    gap = gap_breakdown(plan, prop, bound_schemes(prop))
    assert [ms for _, ms in gap.parts()] == pytest.approx([2.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    assert gap.predicted_ms == pytest.approx(plan.predicted_ms) == pytest.approx(4.0)


@pytest.mark.parametrize("name", ["7b_32dev", "32b_1024dev"])
def test_the_terms_add_up_and_are_not_negative(name):
    prop = example_proposal(name)
    pool = bound_schemes(prop)
    for batch in sample_batches(read_lengths(EXAMPLES / "data" / "longtail.txt"), prop.token_budget, 3, 32_768, seed=2):
        for plan in (dispatch(prop, batch, "fixed_packing"), plan_step(prop, batch)):
            gap = gap_breakdown(plan, prop, pool)
            assert gap.predicted_ms == pytest.approx(plan.predicted_ms, rel=1e-9)
            assert min(ms for _, ms in gap.parts()) >= -1e-6 * plan.predicted_ms

"""The stand-in planner: its worked example, and every sequence placed once within capacity."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hydraulis.presets import model_preset
from hydraulis.runtime.data import step_documents, step_lengths, synthetic_lengths
from hydraulis.runtime.loss import loss_tokens
from hydraulis.runtime.simple_plan import simple_plan, single_device_plan
from hydraulis.runtime.strategy_spec import parse_strategy, scheme_times
from hydraulis.types import BatchingMethod

TINY = model_preset("tiny")
TIMES = scheme_times(TINY, 4)


def test_worked_example():
    plan = simple_plan((40, 30, 20, 10), parse_strategy("1,1,1x2", TINY, TIMES, 64), 50)
    assert [[mb.lengths for mb in p.micro_batches] for p in plan.pipelines] == [[(40, 10)], [(30, 20)]]
    assert plan.method is BatchingMethod.DISPATCH_FIXED_PACKING
    assert plan.predicted_ms == max(p.predicted_ms for p in plan.pipelines) > 0
    assert 0 < plan.lower_bound_ms <= plan.predicted_ms


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 64), min_size=1, max_size=30), st.integers(64, 200),
       st.sampled_from(["1,1,2", "1,2,1+1,1,2", "2,1,1+1,1,1x2"]))
def test_every_sequence_is_placed_once_within_capacity(lengths, capacity, spec):
    plan = simple_plan(lengths, parse_strategy(spec, TINY, TIMES, 64), capacity)
    placed = sorted(i for p in plan.pipelines for mb in p.micro_batches for i in mb.sequences)
    assert placed == list(range(len(lengths)))
    for pipeline in plan.pipelines:
        for mb in pipeline.micro_batches:
            assert mb.lengths == tuple(lengths[i] for i in mb.sequences)
            assert mb.tokens <= capacity
    assert loss_tokens(plan) == sum(lengths) == loss_tokens(single_device_plan(lengths))


def test_steps_are_filled_to_the_budget_and_deterministic():
    pool = synthetic_lengths(64, 3)
    steps = step_lengths(pool, 256, 4, 64, 3)
    assert steps == step_lengths(pool, 256, 4, 64, 3)
    assert all(sum(s) <= 256 and max(s) <= 64 for s in steps)
    docs = step_documents(TINY.vocab, 3, 1, steps[1])
    assert [d.size for d in docs] == [s + 1 for s in steps[1]]
    assert all(np.array_equal(a, b) for a, b in zip(docs, step_documents(TINY.vocab, 3, 1, steps[1])))
    assert not all(np.array_equal(a, b) for a, b in zip(docs, step_documents(TINY.vocab, 4, 1, steps[1])))
    assert all(0 <= d.min() and d.max() < TINY.vocab for d in docs)

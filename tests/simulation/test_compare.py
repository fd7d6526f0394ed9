"""One sampled step under every contender (the plan explorer's comparison), against brute force."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from hydraulis.base.types import BatchingMethod
from hydraulis.base.workload import sample_batches
from hydraulis.dispatch import dispatch
from hydraulis.dispatch.synthesis import plan_step
from hydraulis.planner.options import proposal_options
from hydraulis.simulation import Contender, compare_step
from hydraulis.simulation.contenders import homogeneous_candidates


@pytest.fixture(scope="module")
def comparison(small_simulation, small_space, lengths):
    return compare_step(small_space, small_simulation.proposal, lengths, seed=5)


def test_the_step_is_one_batch_drawn_with_the_seed(comparison, small_simulation, lengths):
    proposal = small_simulation.proposal
    batch = sample_batches(lengths, proposal.token_budget, 1, proposal.max_seq_len, 5)[0]
    assert comparison.lengths == tuple(batch.tolist())
    assert replace(comparison.plan, planning_ms=0.0) == replace(plan_step(proposal, batch), planning_ms=0.0)


def test_speedups_are_the_ratios_to_hydraulis(comparison):
    assert [c.contender for c in comparison.contenders] == list(Contender)
    hydraulis = comparison.contenders[0]
    assert hydraulis.predicted_ms == comparison.plan.predicted_ms and hydraulis.speedup == 1.0
    for step in comparison.contenders:
        assert step.speedup == pytest.approx(step.predicted_ms / hydraulis.predicted_ms)
        assert step.predicted_ms >= step.lower_bound_ms * (1 - 1e-9)
        assert step.predicted_ms >= comparison.work_bound_ms * (1 - 1e-9)


def test_homogeneous_baseline_is_the_best_homogeneous_strategy_for_the_step(comparison, small_simulation,
                                                                          small_space):
    proposal = small_simulation.proposal
    candidates = homogeneous_candidates(small_space, proposal, proposal_options(small_space, proposal))
    best = min(dispatch(c, comparison.lengths, BatchingMethod.FIXED_PACKING).predicted_ms for c in candidates)
    chosen = next(c for c in comparison.contenders if c.contender is Contender.HOMOGENEOUS_FIXED_PACKING)
    assert chosen.predicted_ms == best


def test_timelines_run_every_micro_batch_forward_and_backward_on_every_stage(comparison):
    for pipeline, timeline, times in zip(comparison.plan.pipelines, comparison.timelines, comparison.micro_batch_ms):
        assert len(times) == len(pipeline.micro_batches)
        done = Counter((op.stage, op.micro_batch, op.phase) for op in timeline.ops)
        assert len(done) == len(timeline.ops) == 2 * pipeline.scheme.pp * len(times)
        assert timeline.makespan_ms == pytest.approx(pipeline.predicted_ms)

"""Step planning for the loop: SPEC strategies as one-strategy proposals for the dispatcher,
cycled per step; a proposal's choice kept; the reference's single micro-batch; the summary."""

from dataclasses import replace

import pytest

from hydraulis.artifacts import proposal_from_dict, proposal_to_dict
from hydraulis.base.placement import communicators
from hydraulis.base.presets import model_preset
from hydraulis.base.types import BatchingMethod, PipelineModel
from hydraulis.dispatch import DispatchOptions
from hydraulis.dispatch.synthesis import Synthesise, SynthesisOptions
from hydraulis.job.records import StepRecord, format_record, summarize, summary_line
from hydraulis.job.strategy_spec import parse_strategy, scheme_times
from hydraulis.planner import validate_proposal
from hydraulis.runtime.model.loss import loss_tokens
from hydraulis.runtime.planning import PlanAhead, Planning, single_device_plan, spec_proposal
from tests.dispatch.helpers import BATCH, CHEAP, FAST, consistent_proposal

TINY = model_preset("tiny")
TIMES = scheme_times(TINY, 4)
LENGTHS = (60, 41, 33, 20, 17, 9, 5, 3)


def proposals(*specs: str):
    return tuple(spec_proposal(parse_strategy(spec, TINY, TIMES, 96), TINY, 4, 256, 64, PipelineModel())
                 for spec in specs)


def test_a_spec_proposal_is_a_valid_proposal_that_survives_its_artifact():
    proposal = proposals("1,2,1+1,1,2")[0]
    assert validate_proposal(proposal) is proposal
    assert proposal_from_dict(proposal_to_dict(proposal)) == proposal


@pytest.mark.parametrize("method", list(BatchingMethod))
def test_cycled_strategies_plan_every_sequence_once(method):
    planning = Planning(proposals("1,2,1+1,1,2", "1,1,2x2", "2,1,1+1,1,1x2"), True, method, DispatchOptions())
    for step in range(3):
        plan = planning.plan(step, LENGTHS)
        assert plan.strategy_index == step
        assert len(plan.pipelines) == (2, 2, 3)[step]
        placed = sorted(i for p in plan.pipelines for mb in p.micro_batches for i in mb.sequences)
        assert placed == list(range(len(LENGTHS)))
        assert all(mb.tokens <= 96 for p in plan.pipelines for mb in p.micro_batches)
        assert loss_tokens(plan) == sum(LENGTHS) == loss_tokens(single_device_plan(LENGTHS))


def test_a_proposal_keeps_the_strategy_dispatch_chose():
    proposal = proposals("1,1,1x4")[0]
    two = replace(proposal, strategies=proposal.strategies + proposals("1,4,1")[0].strategies)
    plan = Planning((two,), False, BatchingMethod.DISPATCH_BALANCED_PACKING, DispatchOptions()).plan(5, LENGTHS)
    assert plan.strategy_index in (0, 1) and plan.method is BatchingMethod.DISPATCH_BALANCED_PACKING


def test_a_proposal_run_synthesises_and_remembers_the_communicators_it_created():
    """And the synthesis memory: the next step starts from the strategy this one made."""
    prop = consistent_proposal([[(FAST, 2)], [(CHEAP, 8)]], 8, communicator_ms=1.0)
    planning = Planning((prop,), False, BatchingMethod.DISPATCH_BALANCED_PACKING, DispatchOptions(),
                        synthesis=SynthesisOptions(Synthesise.PROPOSAL))
    ahead = PlanAhead(planning)
    assert ahead.known == planning.warm_communicators() != frozenset()
    ahead.submit(0, BATCH)
    plan = ahead.result()
    assert plan.strategy_index == -1 and str(plan.synthesis.strategy) == "1×(1,4,1) + 4×(1,1,1)"
    assert ahead.known >= communicators([p.scheme for p in plan.pipelines])
    assert ahead.memory.entries[0].strategy == plan.synthesis.strategy
    ahead.submit(1, BATCH)
    assert ahead.result().synthesis.start == "remembered strategy"
    ahead.close()


def test_plan_ahead_returns_the_plan_or_its_error():
    ahead = PlanAhead(Planning(proposals("1,1,1"), True, BatchingMethod.FIXED_PACKING, DispatchOptions()))
    ahead.submit(0, LENGTHS)
    assert loss_tokens(ahead.result()) == sum(LENGTHS)
    ahead.submit(1, (500,))
    with pytest.raises(Exception, match="lengths"):
        ahead.result()
    ahead.close()


def test_summary_worked_example():
    records = [StepRecord(0, "1,2,1x2", 200, 2.0, (90.0,), (70.0,), 1.0, 9.0, 100.0, 80.0, 1.0),
               StepRecord(1, "1,2,1x2", 300, 1.0, (140.0,), (140.0,), 1.0, 9.0, 150.0, 150.0, 1.0, synthesised=True)]
    summary = summarize(records)
    assert summary.tokens_per_s == pytest.approx(2000.0)
    assert summary.prediction_error == pytest.approx(0.1)
    assert summary.warm_prediction_error == pytest.approx(0.0)
    assert summary.strategies == (("1,2,1x2", 2),)
    assert (summary.synthesised, summary.communicators, summary.communicator_bound) == (1, 2, 2)
    assert summarize(records, devices=8).communicator_bound == 4
    assert "1 steps on a strategy made for them; 2 distinct communicators (bound 2)" in summary_line(summary)
    assert "(0% after each strategy's first step: median 0%, p90 0%)" in summary_line(summary)


def test_the_summary_gives_the_steady_state_beside_every_step_and_the_mfu():
    records = [StepRecord(0, "1,1,1", 200, 2.0, (90.0,), (70.0,), 0.0, 9.0, 1000.0, 80.0, 1.0),
               StepRecord(1, "1,1,1", 300, 1.0, (140.0,), (140.0,), 0.0, 9.0, 150.0, 150.0, 1.0)]
    summary = summarize(records, devices=1, params=10**9, peak_flops=989e12)
    assert summary.tokens_per_s == pytest.approx(500 / 1.15)
    assert summary.steady_tokens_per_s == pytest.approx(2000.0)
    assert summary.steady_mfu == pytest.approx(6e9 * 2000 / 989e12)
    assert summary.mfu == pytest.approx(6e9 * 500 / 1.15 / 989e12)
    line = summary_line(summary)
    assert "435 tokens/s over all steps, 2000 steady (the first, warm-up step excluded); MFU 0.003, 0.012 steady" in line
    alone = summarize(records[:1])
    assert alone.steady_tokens_per_s is None and alone.mfu is None
    assert "steady" not in summary_line(alone)


def test_the_step_line_shows_the_hidden_fraction_only_where_recorded():
    record = StepRecord(2, "1,1,2x2", 200, 2.0, (90.0, 80.0), (70.0, 70.0), 1.0, 9.0, 100.0, 80.0, 1.0)
    assert "reduce 9.0  plan" in format_record(record)
    recorded = replace(record, reduction_inflight_ms=40.0, reduction_hidden_ms=10.0)
    assert "reduce 9.0 (hidden 0.25)  plan" in format_record(recorded)


def test_the_warm_error_leaves_out_each_strategys_first_step():
    def step(t, strategy, measured, predicted):
        return StepRecord(t, strategy, 100, 1.0, (measured,), (predicted,), 0.0, 0.0, measured, predicted, 0.0)

    records = [step(0, "1,1,1", 500.0, 50.0), step(1, "1,1,2", 400.0, 40.0), step(2, "1,1,1", 50.0, 40.0),
               step(3, "1,1,2", 40.0, 30.0)]
    summary = summarize(records)
    assert summary.warm_prediction_error == summary.warm_error_median == pytest.approx((0.2 + 0.25) / 2)
    assert summary.warm_error_p90 == pytest.approx(0.25)
    assert summary.prediction_error == pytest.approx((0.9 + 0.9 + 0.2 + 0.25) / 4)
    assert summarize(records[:2]).warm_prediction_error is summarize(records[:2]).warm_error_p90 is None
    assert "after each strategy" not in summary_line(summarize(records[:2]))

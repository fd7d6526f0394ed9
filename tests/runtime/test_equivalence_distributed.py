"""Distributed training equals single-device training (gloo, fp32, tiny, up to 4 processes).

All cases share one spawned job of 4 processes (start-up is most of the cost); cases that need
fewer devices leave the other ranks idle, which still take part in the gradient reduction."""

import pytest

import itertools

from hydraulis.runtime.config import DeviceKind, OptimizerKind, RuntimeOptions, TrainConfig
from hydraulis.runtime.equivalence import check_equivalence
from hydraulis.runtime.run import resolve_run
from hydraulis.types import BatchingMethod

pytestmark = pytest.mark.distributed

ACCEPTANCE = ["1,1,1x2", "1,2,1", "1,1,2", "2,1,1", "1,2,1+1,1,2", "1,1,2+1,1,1x2", "2,1,1+1,1,1x2",
              "1,2,1[sp]", "2,2,1[sp,recompute=full]", "1,1,2[recompute=selective]+1,2,1[sp]", "4,1,1",
              "1,1,2[recompute=full:2/1]+1,2,1[sp,recompute=full:1]"]
OPTIONS = RuntimeOptions(device=DeviceKind.CPU, optimizer=OptimizerKind.SGD, lr=1.0, timeout_s=60.0)
BUDGET = 192
PIPELINE_CASE = TrainConfig("tiny", ("1,1,4",), 2, token_budget=BUDGET, max_seq_len=32, micro_batch_tokens=32,
                            method=BatchingMethod.FIXED_PACKING, runtime=OPTIONS)
CASES = [TrainConfig("tiny", (spec,), 2, token_budget=BUDGET, runtime=OPTIONS) for spec in ACCEPTANCE] + [
    PIPELINE_CASE,
    TrainConfig("tiny", ("1,1,2:3/1+2,1,1", "1,2,1+1,1,2", "2,1,1+1,1,1x2"), 3, token_budget=BUDGET, runtime=OPTIONS),
    TrainConfig("tiny", ("1,4,1",), 2, token_budget=BUDGET, runtime=OPTIONS),
]


@pytest.fixture(scope="module")
def results():
    runs = [resolve_run(config) for config in CASES]
    return dict(zip([" / ".join(c.strategies) for c in CASES], check_equivalence(runs, OPTIONS, nproc=4)))


@pytest.mark.parametrize("spec", ACCEPTANCE)
def test_acceptance_strategies_match_single_device_training(results, spec):
    result = results[spec]
    assert result.max_rel_diff <= 1e-5, (result.worst_parameter, result.max_rel_diff)
    assert result.max_loss_diff <= 1e-5
    assert len(result.records) == 2


def test_a_pipeline_of_micro_batches_of_different_lengths_completes(results):
    run = resolve_run(PIPELINE_CASE)
    for step, batch in enumerate(itertools.islice(run.data.batches(), 2)):
        tokens = [mb.tokens for mb in run.planning.plan(step, batch.lengths).pipelines[0].micro_batches]
        assert len(tokens) >= 4 and len(set(tokens)) > 1, tokens
    assert results["1,1,4"].max_rel_diff <= 1e-5


def test_strategies_switch_from_step_to_step(results):
    result = results["1,1,2:3/1+2,1,1 / 1,2,1+1,1,2 / 2,1,1+1,1,1x2"]
    assert [r.strategy for r in result.records] == ["1,1,2:3/1+2,1,1", "1,2,1+1,1,2", "2,1,1+1,1,1x2"]
    assert result.max_rel_diff <= 1e-5


def test_kv_heads_replicated_over_tp_ranks(results):
    assert results["1,4,1"].max_rel_diff <= 1e-5


def test_step_records_report_every_pipeline(results):
    record = results["1,1,2+1,1,1x2"].records[0]
    assert len(record.measured_ms) == len(record.predicted_ms) == 3
    assert all(ms > 0 for ms in record.measured_ms + record.predicted_ms)
    assert record.tokens == sum(next(resolve_run(CASES[5]).data.batches()).lengths)

"""Executed = simulated: in a real job, every stage of every pipeline runs its forwards and
backwards in the order the cost model's exact 1F1B simulation schedules them
(:func:`hydraulis.cost.simulate_1f1b`), for three heterogeneous strategies whose many-stage
pipelines get unequal micro-batches; each stage's operations follow one another in time."""

import pytest

from hydraulis.cost import simulate_1f1b
from hydraulis.job.config import RuntimeOptions, TrainConfig
from hydraulis.runtime.run import resolve_run
from hydraulis.runtime.trainer import run_training
from hydraulis.sharding.kinds import DeviceKind, OptimizerKind

pytestmark = pytest.mark.distributed

STRATEGIES = ("1,1,2+1,1,1x2", "1,1,3+1,1,1", "1,2,1+1,1,2")
OPTIONS = RuntimeOptions(device=DeviceKind.CPU, optimizer=OptimizerKind.SGD, lr=0.1, record_operations=True)


def test_every_stage_runs_the_simulated_1f1b_order():
    config = TrainConfig("tiny", STRATEGIES, len(STRATEGIES), token_budget=512, nproc=4, runtime=OPTIONS)
    run = resolve_run(config)
    records = run_training(run, OPTIONS, 4)
    assert [r.strategy for r in records] == list(STRATEGIES)
    checked = set()
    for record, layout in zip(records, run.layouts):
        assert [p.pipeline for p in record.operations] == list(range(len(layout.pipelines)))
        for pipeline, recorded in zip(layout.pipelines, record.operations):
            pp, times = pipeline.scheme.pp, recorded.micro_batch_ms
            simulated = simulate_1f1b(times, pp, record=True).ops
            for stage in range(pp):
                expected = [(op.phase.value, op.micro_batch) for op in simulated if op.stage == stage]
                assert recorded.stage_order(stage) == expected, (record.strategy, pipeline.scheme, stage)
                ops = [op for op in recorded.ops if op.stage == stage]
                assert all(0 <= op.start <= op.end for op in ops)
                assert all(a.end <= b.start for a, b in zip(ops, ops[1:]))
            if pp > 1 and len(set(times)) > 1:
                checked.add(record.strategy)
    assert checked == set(STRATEGIES), "every strategy has a many-stage pipeline with unequal micro-batches"

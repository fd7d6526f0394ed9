"""Distributed training equals single-device training (gloo, fp32, tiny, up to 4 processes).

All cases share one spawned job of 4 processes (start-up is most of the cost); cases that need
fewer devices leave the other ranks idle, which still take part in the gradient reduction."""

import itertools
import json
import math

import pytest

from hydraulis.base.types import BatchingMethod
from hydraulis.job.config import RuntimeOptions, TrainConfig
from hydraulis.job.schedule import LrScheduleKind
from hydraulis.runtime.equivalence import check_equivalence
from hydraulis.runtime.rank_map import RankMap
from hydraulis.runtime.run import resolve_run
from hydraulis.sharding.kinds import DeviceKind, OptimizerKind

pytestmark = pytest.mark.distributed

ACCEPTANCE = ["1,1,1x2", "1,2,1", "1,1,2", "2,1,1", "1,2,1+1,1,2", "1,1,2+1,1,1x2", "2,1,1+1,1,1x2",
              "1,2,1[sp]", "2,2,1[sp,recompute=full]", "1,1,2[recompute=selective]+1,2,1[sp]", "4,1,1",
              "1,1,2[recompute=full:2/1]+1,2,1[sp,recompute=full:1]", "1|2:3>1:1", "1|2:1>1:3+1,1,1"]
OPTIONS = RuntimeOptions(device=DeviceKind.CPU, optimizer=OptimizerKind.SGD, lr=1.0, timeout_s=60.0,
                         clip_grad_norm=math.inf, lr_schedule=LrScheduleKind.CONSTANT, bucket_mb=0.1)
"""Plain SGD at lr 1: the step is the gradient itself, so every parameter compares the reduction;
buckets of 0.1 MiB cut tiny's stages in several, holders of different sizes in different counts."""
BUDGET = 192
PIPELINE_CASE = TrainConfig("tiny", ("1,1,4",), 2, token_budget=BUDGET, max_seq_len=32, micro_batch_tokens=32,
                            method=BatchingMethod.FIXED_PACKING, runtime=OPTIONS)
CASES = [TrainConfig("tiny", (spec,), 2, token_budget=BUDGET, runtime=OPTIONS) for spec in ACCEPTANCE] + [
    PIPELINE_CASE,
    TrainConfig("tiny", ("1,1,2:3/1+2,1,1", "1,2,1+1,1,2", "2,1,1+1,1,1x2"), 3, token_budget=BUDGET, runtime=OPTIONS),
    TrainConfig("tiny", ("1,4,1",), 2, token_budget=BUDGET, runtime=OPTIONS),
]
CYCLE = ("1,2,1x2", "2,2,1[sp]", "1,2,2")
"""Three strategies over the same tp rank sets (the second adds two cp groups), cycled for six steps."""
CASES.append(TrainConfig("tiny", CYCLE, 6, token_budget=BUDGET, runtime=OPTIONS))
STAGED_CYCLE = ("1|2:3>1:1+1,1,1", "1,2,1x2", "1|1:1>2:3[recompute=full:1]")
"""Per-stage tp beside a plain pipeline, a plain strategy, then a stage of tp 1 handing off to tp 2."""
CASES.append(TrainConfig("tiny", STAGED_CYCLE, 3, token_budget=BUDGET, runtime=OPTIONS))


LONG_DOCUMENTS = (5000, 900, 300, 60, 1200, 4500)
"""Lengths of the context-parallel case: a batch holding documents of more than 4,096 tokens."""


def _long_documents_case(folder) -> TrainConfig:
    lengths = folder / "long.txt"
    lengths.write_text("\n".join(map(str, LONG_DOCUMENTS)) + "\n")
    return TrainConfig("tiny", ("2,1,1", "1,1,1+2,1,1"), 2, token_budget=8000,
                       max_seq_len=6000, lengths_file=str(lengths), runtime=OPTIONS)


TWO_GROUPS = {"schema_version": 1, "kind": "cluster",
              "groups": [{"name": "x", "device": "cpu", "nodes": 1, "devices_per_node": 2},
                         {"name": "y", "device": "cpu", "nodes": 1, "devices_per_node": 2}],
              "links": [{"groups": ["x", "y"], "gbps": 10.0}]}
ACROSS_GROUPS = "1|2:2@y>1:2@x+1,1,1"
"""On ``TWO_GROUPS`` (x = ranks 0, 1; y = ranks 2, 3): stage 0 on ranks 2, 3, stage 1 on rank 0
and the plain pipeline on rank 1 — the contiguous layout would put them on 0, 1 | 2 | 3."""


def _cluster_case(folder) -> TrainConfig:
    cluster = folder / "two_groups.json"
    cluster.write_text(json.dumps(TWO_GROUPS))
    return TrainConfig("tiny", (ACROSS_GROUPS,), 2, token_budget=BUDGET, cluster_file=str(cluster), runtime=OPTIONS)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    cases = CASES + [_long_documents_case(tmp_path_factory.mktemp("lengths")),
                     _cluster_case(tmp_path_factory.mktemp("cluster"))]
    runs = [resolve_run(config) for config in cases]
    return dict(zip([" / ".join(c.strategies) for c in cases], check_equivalence(runs, OPTIONS, nproc=4)))


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


def test_staged_and_plain_strategies_alternate(results):
    result = results[" / ".join(STAGED_CYCLE)]
    assert [r.strategy for r in result.records] == list(STAGED_CYCLE)
    assert result.max_rel_diff <= 1e-5


def test_kv_heads_replicated_over_tp_ranks(results):
    assert results["1,4,1"].max_rel_diff <= 1e-5


def test_step_records_report_every_pipeline(results):
    record = results["1,1,2+1,1,1x2"].records[0]
    assert len(record.measured_ms) == len(record.predicted_ms) == 3
    assert all(ms > 0 for ms in record.measured_ms + record.predicted_ms)
    assert record.tokens == sum(next(resolve_run(CASES[5]).data.batches()).lengths)


def test_context_parallelism_over_documents_longer_than_4096_tokens(results, tmp_path):
    batch = next(resolve_run(_long_documents_case(tmp_path)).data.batches())
    assert max(batch.lengths) > 4096
    result = results["2,1,1 / 1,1,1+2,1,1"]
    assert result.max_rel_diff <= 1e-5, (result.worst_parameter, result.max_rel_diff)


def test_cycling_three_strategies_creates_every_communicator_before_the_first_step(results):
    result = results[" / ".join(CYCLE)]
    assert [r.communicators for r in result.records] == [0] * 6
    assert result.max_rel_diff <= 1e-5


def test_stages_run_on_their_device_groups_ranks(results, tmp_path):
    run = resolve_run(_cluster_case(tmp_path))
    rank_map = RankMap(run.layouts[0].pipelines, 4, run.cluster.rank_ranges())
    assert [rank_map.stage_ranks(0, 0), rank_map.stage_ranks(0, 1), rank_map.stage_ranks(1, 0)] == [(2, 3), (0,), (1,)]
    result = results[ACROSS_GROUPS]
    assert result.max_rel_diff <= 1e-5, (result.worst_parameter, result.max_rel_diff)

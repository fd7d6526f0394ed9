"""A mixture of experts trains distributed as on one process (gloo, fp32, tiny-moe, 4 processes):
expert parallelism alone, beside a dense-layout pipeline, with context parallelism and pipelines
(every layout's gradient, balance loss included, within 1e-5 of the single process), and
``hydraulis train`` under a proposal logs the balance loss and each expert's tokens."""

import math

import pytest

from hydraulis.artifacts.proposal import write_proposal
from hydraulis.artifacts.train_log import read_train_log
from hydraulis.base.presets import device_preset, model_preset
from hydraulis.base.types import Cluster
from hydraulis.job.config import RuntimeOptions, TrainConfig
from hydraulis.job.schedule import LrScheduleKind
from hydraulis.planner import PlannerConfig, propose
from hydraulis.profiler.analytic import analytic_scheme_space
from hydraulis.runtime.equivalence import check_equivalence
from hydraulis.runtime.run import resolve_run
from hydraulis.sharding.kinds import DeviceKind, OptimizerKind
from tests.cli.helpers import hydraulis_process

pytestmark = pytest.mark.distributed

STRATEGIES = ["1,2,1[sp,ep=2]", "1,2,1[sp,ep=2]+1,1,1", "2,2,1[sp,ep=2]", "1,4,1[sp,ep=4]",
              "1,2,2[sp,ep=2]", "1,1,2+2,1,1"]
"""EP 2 alone; EP beside a dense layout; EP with cp; EP 4; EP in a pipeline of two stages; dense
layouts only (the balance loss per document under cp and pp)."""
OPTIONS = RuntimeOptions(device=DeviceKind.CPU, optimizer=OptimizerKind.SGD, lr=1.0, timeout_s=120.0,
                         clip_grad_norm=math.inf, lr_schedule=LrScheduleKind.CONSTANT)
"""Plain SGD at lr 1: the step is the gradient itself, so every parameter compares the reduction."""


@pytest.fixture(scope="module")
def results():
    cases = [TrainConfig("tiny-moe", (spec,), 2, token_budget=192, runtime=OPTIONS) for spec in STRATEGIES]
    return dict(zip(STRATEGIES, check_equivalence([resolve_run(c) for c in cases], OPTIONS, nproc=4)))


@pytest.mark.parametrize("spec", STRATEGIES)
def test_expert_parallel_strategies_match_single_process_training(results, spec):
    result = results[spec]
    assert result.max_rel_diff <= 1e-5, (result.worst_parameter, result.max_rel_diff)
    assert result.max_loss_diff <= 1e-5
    model = model_preset("tiny-moe")
    for record in result.records:
        assert sum(record.tokens_per_expert) == record.tokens * model.top_k * model.layers
        assert record.aux_loss > 0


def test_train_under_a_proposal_logs_the_balance_loss_and_tokens_per_expert(tmp_path):
    model = model_preset("tiny-moe")
    space = analytic_scheme_space(model, device_preset("cpu"), Cluster(4, 4, "cpu"), (1, 2), (1, 2), (1, 2),
                                  created="2026-01-01T00:00:00+00:00", tool_version="test", segments=True)
    config = PlannerConfig(devices=4, devices_per_node=4, token_budget=512, max_seq_len=128, strategies=2)
    write_proposal(tmp_path / "proposal.json", propose(space, [100, 300, 700, 2000, 40, 60] * 20, config))
    result = hydraulis_process("train", "--model", "tiny-moe", "--proposal", str(tmp_path / "proposal.json"),
                               "--steps", "2", "--device", "cpu", "--output-dir", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if "rank 0 INFO" in line and " step " in line]
    assert len(lines) == 2 and all(" aux " in line and " tokens/expert " in line for line in lines)
    for record in read_train_log(tmp_path / "out" / "train_log.json"):
        assert len(record.tokens_per_expert) == model.experts
        assert sum(record.tokens_per_expert) == record.tokens * model.top_k * model.layers
        assert record.aux_loss > 0

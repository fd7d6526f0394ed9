"""``hydraulis train`` and ``hydraulis check-equivalence`` on the command line."""

import json
import os
import re

import pytest

from hydraulis.artifacts import write_proposal
from hydraulis.artifacts.train_log import read_train_log
from hydraulis.base.directories import complete_files
from hydraulis.base.presets import device_preset, model_preset
from hydraulis.base.types import (
    Cluster,
    OptimizerLayout,
    PipelineGroup,
    PipelineModel,
    Proposal,
    ProposedStrategy,
    Scheme,
    SolverReport,
    Strategy,
    TimeCoefficients,
)
from hydraulis.planner import PlannerConfig, propose
from hydraulis.profiler.analytic import analytic_scheme_space
from hydraulis.runtime.checkpoint.resume import find_checkpoint
from tests.cli.helpers import hydraulis, hydraulis_process
from tests.conftest import SERVICE_TOKEN, free_port
from tests.data.conftest import write_code_corpus

ACCEPTANCE = ("check-equivalence", "--model", "tiny", "--strategy", "1,2,1+1,1,2", "--strategy", "1,1,2x2",
              "--strategy", "2,1,1+1,1,1x2", "--steps", "5")


@pytest.mark.parametrize("args, words", [
    (("check-equivalence", "--steps", "2"), "--strategy: None is required"),
    (("check-equivalence", "--strategy", "1,3,1"), "does not divide model.heads"),
    (("check-equivalence", "--strategy", "1,2"), "pipeline 1 ('1,2') must be cp,tp,pp"),
    (("check-equivalence", "--strategy", "1,2,1[zero]"), "strategies[0][0].options: 'zero' is not an option"),
    (("check-equivalence", "--strategy", "1,2,1+1,1,1[sp]"), "strategies[0][1].sp: True needs scheme.tp > 1"),
    (("check-equivalence", "--strategy", "1,1,2:3[recompute=full]"), "one layer count per stage (pp = 2)"),
    (("check-equivalence", "--strategy", "1,2,1x4", "--nproc", "4"), "is fewer than the 8 devices a strategy uses"),
    (("check-equivalence", "--strategy", "1|2:3>1:2"), "hold 5 layers in all, not model.layers = 4"),
    (("check-equivalence", "--strategy", "1,1,1+1|3:3>1:1"), "stages[0].tp: 3 does not divide model.heads = 4"),
    (("check-equivalence", "--strategy", "1|2:3>1:1[sp]"), "sp: True is not supported with per-stage tp"),
    (("check-equivalence", "--strategy", "1|2:3>1:1x2", "--nproc", "4"), "is fewer than the 6 devices a strategy uses"),
    (("train", "--strategy", "1,1,1", "--steps", "2"), "--model: None is required"),
    (("train", "--config", "missing.json"), "does not exist"),
    (("train", "--model", "tiny", "--strategy", "1,1,1", "--steps", "0"), "steps: 0 trains nothing"),
    (("train", "--model", "tiny", "--steps", "2"), "give strategy SPECs or a proposal file"),
    (("train", "--model", "tiny", "--strategy", "1,1,1", "--steps", "2", "--resume", "nowhere"),
     "holds no complete checkpoint"),
    (("train", "--model", "tiny", "--strategy", "1,1,1", "--steps", "2", "--optimizer-layout", "3,1,1", "--nproc", "2"),
     "does not divide the 2 devices"),
    (("train", "--model", "tiny", "--strategy", "1,1,1", "--steps", "2", "--planner-url", "localhost:8000"),
     "must start with http://"),
])
def test_bad_input_exits_2_with_one_line(args, words):
    result = hydraulis(*args)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and words in result.stderr


@pytest.mark.distributed
def test_the_acceptance_check_equivalence_runs_adam_and_ends_with_max_rel_diff():
    result = hydraulis_process(*ACCEPTANCE)
    assert result.returncode == 0, result.stderr
    *_, grads, last = result.stdout.strip().splitlines()
    assert grads.startswith("max_grad_rel_diff=") and float(grads.split("=")[1]) <= 1e-5
    assert last.startswith("max_rel_diff=") and float(last.split("=")[1]) <= 1e-5
    assert result.stdout.startswith("tiny, adam lr 0.0001, seed 0")
    assert "2,1,1+1,1,1x2" in result.stdout
    assert "strategy 1,1,2x2 " in result.stderr and "ms measured/predicted" in result.stderr


@pytest.mark.distributed
def test_train_spawns_processes_and_saves_its_resolved_config(tmp_path):
    config = tmp_path / "train.json"
    config.write_text(json.dumps({"schema_version": 1, "kind": "train_config", "model": "tiny",
                                  "strategies": ["1,1,1"], "steps": 2, "token_budget": 128,
                                  "runtime": {"device": "cpu"}}))
    result = hydraulis_process("train", "--config", config, "--steps", "3", "--output-dir", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    steps = [line for line in result.stderr.splitlines() if "rank 0 INFO" in line and " step " in line]
    assert len(steps) == 3 and all("strategy 1,1,1 " in line for line in steps)
    saved = json.loads((tmp_path / "out" / "train_config.json").read_text())
    assert saved["steps"] == 3 and saved["token_budget"] == 128 and saved["runtime"]["optimizer"] == "adamw"
    assert result.stdout.splitlines()[0].startswith("summary: 3 steps")  # each step is printed once, live
    assert re.search(r"[0-9]+ tokens/s over all steps, [0-9]+ steady \(the first, warm-up step excluded\); "
                     r"MFU [0-9.]+, [0-9.]+ steady", result.stdout)
    assert all("update (no exchange)" in line for line in steps)
    assert not any(line.startswith("step ") for line in result.stdout.splitlines())
    assert [r.step for r in read_train_log(tmp_path / "out" / "train_log.json")] == [0, 1, 2]
    assert complete_files(tmp_path / "out") == ["train_config.json", "train_log.json"]


@pytest.mark.distributed
def test_train_on_a_corpus_under_a_proposal_planned_by_the_service(tmp_path, planning_service):
    corpus = write_code_corpus(tmp_path / "code.jsonl")
    device = device_preset("cpu")
    space = analytic_scheme_space(model_preset("tiny"), device, Cluster(2, 2, "cpu"), (1, 2), (1, 2), (1, 2),
                                  created="2026-01-01T00:00:00+00:00", tool_version="test")
    config = PlannerConfig(devices=2, devices_per_node=2, token_budget=512, max_seq_len=128, strategies=2)
    write_proposal(tmp_path / "proposal.json", propose(space, [100, 300, 700, 2000, 40, 60] * 20, config))
    environment = dict(os.environ, HYDRAULIS_API_TOKEN=SERVICE_TOKEN)
    result = hydraulis_process("--log-level", "info", "train", "--model", "tiny", "--proposal",
                               str(tmp_path / "proposal.json"), "--corpus", str(corpus), "--cache-dir",
                               str(tmp_path / "cache"), "--planner-url", planning_service, "--steps", "2", "--device",
                               "cpu", "--checkpoint-dir", str(tmp_path / "checkpoints"), "--output-dir",
                               str(tmp_path / "out"), env=environment)
    assert result.returncode == 0, result.stderr[-3000:]
    records = read_train_log(tmp_path / "out" / "train_log.json")
    assert len(records) == 2 and all(0 < r.tokens <= 512 and r.predicted_step_ms > 0 for r in records)
    saved = find_checkpoint(tmp_path / "checkpoints").manifest
    assert saved.step == 2 and saved.data_fingerprint.startswith("corpus sha256:")


@pytest.mark.distributed
def test_train_runs_strategies_made_for_their_steps_and_counts_their_communicators(tmp_path):
    """2×(1,2,1) holds the long pieces, 4×(1,1,1) does not; steps with one long piece run
    faster on 1×(1,2,1) + 2×(1,1,1), which the runtime places largest first."""
    fast = PipelineGroup(Scheme(1, 2, 1), 2, 64, TimeCoefficients(0.0, 0.07, 1.0))
    cheap = PipelineGroup(Scheme(1, 1, 1), 4, 24, TimeCoefficients(0.0, 0.1, 1.0))
    strategies = tuple(ProposedStrategy(Strategy((g,)), 0, g.max_seq_len, 0.0, 0.0, (0,)) for g in (fast, cheap))
    proposal = Proposal(model_preset("tiny"), 4, 4, OptimizerLayout(4, 1, 1), strategies, 256, 64, PipelineModel(),
                        SolverReport("hand_written", "test", 0.0))
    write_proposal(tmp_path / "proposal.json", proposal)
    result = hydraulis("train", "--model", "tiny", "--proposal", str(tmp_path / "proposal.json"), "--steps", "3",
                       "--device", "cpu", "--output-dir", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr[-3000:]
    records = read_train_log(tmp_path / "out" / "train_log.json")
    made = [r for r in records if r.synthesised]
    assert made and all(r.strategy not in ("1,2,1x2", "1,1,1x4") for r in made)
    assert all(r.loss == r.loss and r.loss > 0 for r in records)
    assert "steps on a strategy made for them" in result.stdout and "distinct communicators (bound" in result.stdout


@pytest.mark.distributed
def test_a_planning_service_that_is_down_ends_every_rank_with_its_error():
    url = f"http://127.0.0.1:{free_port()}"
    result = hydraulis("train", "--model", "tiny", "--strategy", "1,1,1", "--nproc", "2", "--steps", "2",
                       "--device", "cpu", "--planner-url", url)
    assert result.returncode == 1
    assert f"planner service {url}/v1/step-plans: no step plan after 3 attempts" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("hydraulis: error: rank ")

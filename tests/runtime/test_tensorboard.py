"""TensorBoard events of a training run: the scalars of a step, the proposal as text, and
``hydraulis train --tensorboard`` on the e2e example's space, read back from the event files."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from hydraulis.artifacts import read_proposal
from hydraulis.artifacts.train_log import read_train_log
from hydraulis.job.records import StepRecord
from hydraulis.runtime.tensorboard import TEXT_TAG, RunRates, proposal_markdown, step_scalars
from tests.cli.helpers import hydraulis

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TAGS = {"train/loss", "train/tokens_per_s", "time/measured_step_ms", "time/predicted_step_ms",
        "time/prediction_error", "plan/strategy_index", "plan/planning_ms", "plan/wait_ms",
        "runtime/communicators_created", "train/lr", "train/grad_norm", "train/skipped_steps",
        "time/slowest_pipeline_ms", "time/propagate_ms", "time/reduce_ms"}
RUN_TAGS = {"run/tokens_per_s", "run/steady_tokens_per_s", "run/mfu", "run/steady_mfu"}


def test_step_scalars_worked_example():
    record = StepRecord(3, "1,1,1", 500, 2.5, (180.0,), (140.0,), 5.0, 15.0, 200.0, 150.0, 1.5, 50.0, 1, 2,
                        lr=3e-4, grad_norm=1.25, skipped_steps=1)
    assert step_scalars(record) == {"train/loss": 2.5, "train/tokens_per_s": 2000.0, "time/measured_step_ms": 200.0,
                                    "time/predicted_step_ms": 150.0, "time/prediction_error": 0.25,
                                    "plan/strategy_index": 1.0, "plan/planning_ms": 1.5, "plan/wait_ms": 50.0,
                                    "runtime/communicators_created": 2.0, "train/lr": 3e-4, "train/grad_norm": 1.25,
                                    "train/skipped_steps": 1.0, "time/slowest_pipeline_ms": 180.0,
                                    "time/propagate_ms": 5.0, "time/reduce_ms": 15.0}


def test_run_rates_leave_the_warm_up_step_out_of_the_steady_figures():
    def step(t, tokens, ms):
        return StepRecord(t, "1,1,1", tokens, 1.0, (ms,), (ms,), 0.0, 0.0, ms, ms, 0.0)

    rates = RunRates(flops_per_token=6e9, peak_flops=989e12)
    assert rates.add(step(0, 200, 1000.0)) == {"run/tokens_per_s": 200.0, "run/mfu": 6e9 * 200.0 / 989e12}
    second = rates.add(step(1, 300, 150.0))
    assert second["run/tokens_per_s"] == pytest.approx(500 / 1.15)
    assert second["run/steady_tokens_per_s"] == pytest.approx(2000.0)
    assert second["run/steady_mfu"] == pytest.approx(6e9 * 2000.0 / 989e12)
    assert set(RunRates().add(step(0, 200, 1000.0))) == {"run/tokens_per_s"}


def test_step_scalars_add_the_hidden_fraction_only_where_recorded():
    record = StepRecord(0, "1,1,1x2", 500, 2.5, (180.0, 120.0), (140.0, 140.0), 5.0, 15.0, 200.0, 150.0, 1.5,
                        reduction_inflight_ms=40.0, reduction_hidden_ms=10.0)
    scalars = step_scalars(record)
    assert scalars["reduction/hidden_fraction"] == 0.25 and scalars["time/slowest_pipeline_ms"] == 180.0
    assert "reduction/hidden_fraction" not in step_scalars(replace(record, reduction_inflight_ms=0.0))


def test_proposal_markdown_has_a_row_per_strategy_in_index_order():
    proposal = read_proposal(EXAMPLES / "proposals" / "7b_32dev.json")
    text = proposal_markdown((proposal,), cycle=False)
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert len(rows) == 2 + len(proposal.strategies)
    assert rows[0].startswith("| strategy | serves |") and rows[2].startswith(f"| 0 | (0, {proposal.strategies[0].serves_to}]")
    assert proposal.explanation in text
    first, second = (replace(proposal, strategies=(s,)) for s in proposal.strategies[:2])
    cycled = proposal_markdown((second, first), cycle=True)
    assert "cycled per step" in cycled and "| 0 | (" in cycled and str(second.strategies[0].strategy) in \
        cycled.splitlines()[4]


@pytest.mark.distributed
def test_train_writes_every_scalar_per_step_and_the_proposal(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    space = EXAMPLES / "spaces" / "tiny_cpu.json"
    common = ("--token-budget", "1024", "--max-seq-len", "256")
    proposed = hydraulis("propose", "--space", str(space), "--devices", "2", "--devices-per-node", "2", *common,
                         "--lengths", str(EXAMPLES / "data" / "longtail.txt"), "--strategies", "2", "--time-limit",
                         "5", "-o", str(tmp_path / "proposal.json"))
    assert proposed.returncode == 0, proposed.stderr
    result = hydraulis("train", "--model", "tiny", "--proposal", str(tmp_path / "proposal.json"), "--steps", "2",
                       "--nproc", "2", "--device", "cpu", *common, "--tensorboard", str(tmp_path / "board"),
                       "--output-dir", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr[-3000:]
    events = EventAccumulator(str(tmp_path / "board"))
    events.Reload()
    assert set(events.Tags()["scalars"]) == TAGS | RUN_TAGS
    records = read_train_log(tmp_path / "out" / "train_log.json")
    for tag in TAGS:
        written = events.Scalars(tag)
        assert [e.step for e in written] == [0, 1]
        for event, record in zip(written, records):
            assert event.value == pytest.approx(step_scalars(record)[tag], rel=1e-6)
    text = events.Tensors(f"{TEXT_TAG}/text_summary")[0].tensor_proto.string_val[0].decode()
    assert text == proposal_markdown((read_proposal(tmp_path / "proposal.json"),), cycle=False)

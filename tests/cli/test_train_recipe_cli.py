"""``hydraulis train`` with the recipe's flags and a TOML job file: bad recipes exit 2 with one
line naming the field, the value and the limit; the example job runs with a flag overriding a
key, and the resolved config it saves loads back."""

from pathlib import Path

import pytest

from hydraulis.artifacts import read_train_config
from hydraulis.artifacts.train_log import read_train_log
from hydraulis.cli import build_parser, main
from hydraulis.cli.train import job_config
from tests.cli.helpers import hydraulis

ROOT = Path(__file__).resolve().parents[2]
JOB = ["train", "--model", "tiny", "--strategy", "1,1,1", "--steps", "3"]


@pytest.mark.parametrize("args, words", [
    ([*JOB, "--tokenizer", "t.json"], "tokenizer: 't.json' needs a corpus"),
    ([*JOB, "--min-lr", "0.1", "--lr", "0.01"], "min_lr: 0.1 must be between 0 and lr = 0.01"),
    (["train", "--config", "JOB", "--steps", "3"], "job.toml: optimizer.weight_decya: 0.1 is not a key"),
])
def test_bad_recipes_exit_2_with_one_line(tmp_path, capsys, args, words):
    job = tmp_path / "job.toml"
    job.write_text("[optimizer]\nweight_decya = 0.1\n")
    assert main([str(job) if a == "JOB" else a for a in args]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and words in error


@pytest.mark.parametrize("args, words", [
    (["--lr-schedule", "step"], "--lr-schedule: invalid choice: 'step'"),
    (["--weight-decay", "-1"], "--weight-decay: '-1' must be between 0 and 10"),
    (["--clip-grad-norm", "0"], "--clip-grad-norm: '0' must be > 0 and <= inf"),
    (["--betas", "0.9", "2"], "--betas: '2' must be between 0 and 1"),
])
def test_out_of_range_recipe_flags_are_refused_by_their_flag(capsys, args, words):
    with pytest.raises(SystemExit) as stopped:
        main([*JOB, *args])
    error = capsys.readouterr().err
    assert stopped.value.code == 2 and words in error and error.count("\n") == 1


@pytest.mark.distributed
@pytest.mark.slow
def test_the_example_job_runs_a_flag_overrides_a_key_and_the_saved_config_loads_back(tmp_path):
    out = tmp_path / "out"
    result = hydraulis("train", "--config", "examples/configs/tiny.toml", "--steps", "3", "--lr", "2e-3",
                       "--output-dir", str(out), cwd=ROOT)
    assert result.returncode == 0, result.stderr
    records = read_train_log(out / "train_log.json")
    assert [r.step for r in records] == [0, 1, 2] and records[1].lr == 2e-3 and records[0].lr == 1e-3
    assert all(r.grad_norm > 0 and not r.skipped for r in records)
    saved = read_train_config(out / "train_config.json")
    assert (saved.steps, saved.runtime.lr, saved.runtime.warmup_steps, saved.runtime.min_lr) == (3, 2e-3, 2, 1e-4)
    assert job_config(build_parser().parse_args(["train", "--config", str(out / "train_config.json")])) == saved

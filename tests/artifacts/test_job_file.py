"""The TOML job file: every key lands as its flag, unknown sections and keys and values of the
wrong type are refused naming the key; the example job reads."""

from pathlib import Path

import pytest

from hydraulis.artifacts.job_file import read_job_file
from hydraulis.base.errors import HydraulisError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "configs" / "tiny.toml"


def test_the_example_job_reads_as_flags():
    values = read_job_file(EXAMPLE)
    assert values["model"] == "tiny" and values["steps"] == 6 and values["betas"] == (0.9, 0.95)
    assert values["strategy"] == ["1,2,1+1,1,2", "1,1,2x2", "2,1,1+1,1,1x2"]
    assert values["lr_schedule"] == "cosine" and values["warmup_steps"] == 2 and values["lr"] == 1e-3


@pytest.mark.parametrize("text, words", [
    ("[training]\nstepz = 3\n", "job.toml: training.stepz: 3 is not a key of [training]"),
    ("[train]\nsteps = 3\n", "job.toml: [train]"),
    ("[training]\nsteps = \"3\"\n", "job.toml: training.steps: '3' must be an integer"),
    ("[optimizer]\nlr = true\n", "job.toml: optimizer.lr: True must be a number"),
    ("[optimizer]\nbetas = [0.9]\n", "job.toml: optimizer.betas: [0.9] must be two numbers"),
    ("[lr_scheduler]\nlr_schedule = \"step\"\n", "job.toml: lr_scheduler.lr_schedule: 'step' must be one of"),
    ("[training\n", "config:"),
])
def test_bad_files_name_the_key_the_value_and_the_limit(tmp_path, text, words):
    path = tmp_path / "job.toml"
    path.write_text(text)
    with pytest.raises(HydraulisError) as error:
        read_job_file(path)
    assert str(error.value).startswith(words)

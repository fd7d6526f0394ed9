"""The job's option tree is the one source: walking it gives exactly the ``train`` flags, the TOML
keys and the saved JSON's fields; the keys the issue found missing load; a warm-up longer than
``--steps`` is cut with a warning."""

import argparse
import logging
from pathlib import Path

import pytest

from hydraulis.artifacts import train_config_to_dict
from hydraulis.artifacts.job_file import job_file_keys, read_job_file
from hydraulis.base.errors import HydraulisError
from hydraulis.cli import build_parser
from hydraulis.cli.train import job_config
from hydraulis.job.config import TrainConfig
from hydraulis.job.options import Section, job_options

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "configs"
COMMAND_FLAGS = {"train": {"--help", "--config", "--output-dir", "--log-level"},
                 "check-equivalence": {"--help", "--tolerance", "--log-level"}}
"""Flags of the commands that are not job options: where the job comes from and goes to."""


def _subcommand(name: str) -> argparse.ArgumentParser:
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return commands.choices[name]


def _flags(parser: argparse.ArgumentParser) -> dict[str, str]:
    return {flag: action.dest for action in parser._actions for flag in action.option_strings
            if not flag.startswith("--no-") or action.dest == "no_resume"}


@pytest.mark.parametrize("command", ["train", "check-equivalence"])
def test_every_option_is_a_flag_and_every_flag_an_option(command):
    leaves = [leaf for leaf in job_options(TrainConfig) if command == "train" or not leaf.option.train_only]
    flags = {flag: dest for flag, dest in _flags(_subcommand(command)).items() if flag.startswith("--")}
    assert {leaf.flag: leaf.key for leaf in leaves} == {
        flag: dest for flag, dest in flags.items() if flag not in COMMAND_FLAGS[command]}


def test_every_option_is_a_key_of_its_section_and_every_key_an_option():
    keys = {(section, key) for section, leaves in job_file_keys().items() for key in leaves}
    assert keys == {(leaf.option.section.value, leaf.key) for leaf in job_options(TrainConfig)}
    assert list(job_file_keys()) == [section.value for section in Section]
    assert len({leaf.key for leaf in job_options(TrainConfig)}) == len(keys)


def test_every_option_is_a_field_of_the_saved_config():
    saved = train_config_to_dict(TrainConfig("tiny", ("1,1,1",), 2))
    fields = {(name,) for name in saved if name not in ("schema_version", "kind", "runtime")}
    fields |= {("runtime", name) for name in saved["runtime"]}
    assert fields == {leaf.path for leaf in job_options(TrainConfig)}


def test_the_keys_the_flags_had_alone_load_from_a_job_file(tmp_path):
    path = tmp_path / "job.toml"
    path.write_text('[model]\nmodel = "tiny"\n[training]\nsteps = 4\n[parallelism]\nstrategy = ["1,1,1"]\n'
                    "[runtime]\noverlap_reduction = false\nbucket_mb = 8\nallow_math_attention = true\n"
                    '[checkpoint]\ncheckpoint_dir = "ck"\nkeep_checkpoints = 5\nno_resume = true\n'
                    "overwrite_checkpoints = true\n")
    config = job_config(build_parser().parse_args(["train", "--config", str(path)]))
    assert not config.runtime.overlap_reduction and config.runtime.bucket_mb == 8.0
    assert config.runtime.allow_math_attention and config.keep_checkpoints == 5
    assert config.fresh and config.overwrite
    flags = job_config(build_parser().parse_args(["train", "--config", str(path), "--overlap-reduction",
                                                  "--keep-checkpoints", "3"]))
    assert flags.runtime.overlap_reduction and flags.keep_checkpoints == 3


@pytest.mark.parametrize("text, words", [
    ("[runtime]\nbucket_mb = 0\n", "job.toml: runtime.bucket_mb: 0 must be"),
    ("[checkpoint]\nkeep_checkpoints = 0\n", "job.toml: checkpoint.keep_checkpoints: 0 must be"),
    ("[model]\nmodel = \"gpt-9\"\n", "job.toml: model.model: 'gpt-9' must be one of"),
    ("[runtime]\nlr = 1e-3\n", "job.toml: runtime.lr: 0.001 is not a key of [runtime]"),
])
def test_a_key_out_of_its_limit_or_section_is_refused_naming_it(tmp_path, text, words):
    path = tmp_path / "job.toml"
    path.write_text(text)
    with pytest.raises(HydraulisError) as error:
        read_job_file(path)
    assert str(error.value).startswith(words)


def test_steps_shorter_than_the_warmup_cut_it_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING):
        config = job_config(build_parser().parse_args(
            ["train", "--config", str(EXAMPLES / "stdlib.toml"), "--steps", "2"]))
    assert config.steps == 2 and config.runtime.warmup_steps == 2
    assert "warmup_steps = 20 is longer than steps = 2" in caplog.text
    full = job_config(build_parser().parse_args(["train", "--config", str(EXAMPLES / "stdlib.toml")]))
    assert full.runtime.warmup_steps == 20

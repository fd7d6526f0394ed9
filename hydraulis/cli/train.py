"""``hydraulis train``: train with step plans from the dispatcher, on local processes or under
torchrun (``torchrun --nproc-per-node N -m hydraulis train --config train.json``)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from hydraulis.artifacts import read_train_config, write_train_config
from hydraulis.artifacts.job_file import read_job_file
from hydraulis.base.directories import mark, unmark
from hydraulis.cli.arguments import FileKind, InputFile, OutputPath
from hydraulis.cli.output import emit
from hydraulis.cli.training_args import add_training_arguments, training_config
from hydraulis.job.config import TrainConfig
from hydraulis.job.manifest import CheckpointManifest
from hydraulis.runtime.run import resolve_run
from hydraulis.sharding.kinds import DeviceKind


def register(commands: argparse._SubParsersAction) -> None:
    train = commands.add_parser(
        "train", help="train with heterogeneous strategies on local processes or under torchrun",
        description="Train a model preset, or a Hugging Face Llama (--init-from), on a corpus (--corpus) or "
                    "synthetic documents: global batches filled "
                    "to --token-budget, each planned by the dispatcher with --method — under a --proposal (the "
                    "strategy chosen per step) or the --strategy SPECs cycled per step — optionally by a running "
                    "planning service (--planner-url). fp32 master weights and Adam moments live in one optimizer "
                    "layout whatever strategy computes a step. Rank 0 logs one line per step as it ends "
                    "(strategy, tokens, loss, measured vs predicted ms); at the end a summary (tokens/s, mean "
                    "prediction error, also without each strategy's first step), and with --output-dir every "
                    "step's record in train_log.json. Without torchrun it spawns "
                    "--nproc local processes; under torchrun "
                    "(RANK, WORLD_SIZE, ... set) this process is one rank: torchrun --nproc-per-node N -m "
                    "hydraulis train ...",
        epilog="Rank 0 plans each step one step ahead (or asks --planner-url) and broadcasts the plan to all "
               "ranks; each step's line also counts the process groups created. The summary's prediction error "
               "is the mean, and the median and p90 after warm-up; with per-step synthesis it counts the "
               "synthesised steps and the distinct communicators against the bound of aligned placement. "
               "Checkpoints are written atomically from the optimizer layout, so a run resumes under another "
               "proposal, strategy, method or process count. With --cluster each stage runs on its group's "
               "ranks (design §9.2). docs/guide.md describes the runtime, checkpoints and TensorBoard tags.")
    train.add_argument("--config", type=InputFile(FileKind.TRAIN_CONFIG),
                       help="job file: TOML with every flag a key in torchtitan-like sections (examples/configs/"
                            "tiny.toml; see hydraulis.artifacts.job_file), or the JSON train_config.json an "
                            "--output-dir holds; flags override it")
    add_training_arguments(train)
    train.add_argument("--output-dir", type=OutputPath(),
                       help="folder for the resolved config (train_config.json) and the step "
                            "records (train_log.json); complete once .hydraulis-complete.json lists them")
    train.set_defaults(run=_train)


def _train(args: argparse.Namespace) -> None:
    config = job_config(args)
    run = resolve_run(config, _gpu_name(config))
    writer = args.output_dir and os.environ.get("RANK", "0") == "0"
    if writer:
        started = unmark(args.output_dir)
        write_train_config(Path(args.output_dir) / "train_config.json", config)
    from hydraulis.artifacts.train_log import write_train_log
    from hydraulis.job.records import summarize, summary_line
    from hydraulis.runtime.launch import RankFailure
    from hydraulis.runtime.trainer import run_training

    try:
        records = run_training(run, config.runtime, config.nproc, args.log_level)
    except RankFailure as failure:
        sys.stderr.write(f"hydraulis: error: {failure}\n")
        raise SystemExit(1) from None
    if config.steps == 0:
        emit(f"initial checkpoint: {Path(config.checkpoint_dir) / CheckpointManifest.name(0)}")
    if records:
        emit(summary_line(summarize(records, config.nproc or run.devices, run.model.params,
                                    run.device.peak_tflops * 1e12)))
        if writer:
            log = Path(args.output_dir) / "train_log.json"
            write_train_log(log, records)
            emit(f"wrote {log}: every step's record")
    if writer:
        mark(args.output_dir, started)


def _gpu_name(config: TrainConfig) -> str | None:
    """The GPU the job runs on (None: the CPU; asking needs torch, so a CPU job does not ask)."""
    if config.runtime.device is DeviceKind.CPU:
        return None
    from hydraulis.runtime.profiling.device import cuda_device_name

    return cuda_device_name(config.runtime.device)


def job_config(args: argparse.Namespace) -> TrainConfig:
    """The flags applied to the ``--config`` file (a TOML job file's keys are flags given first)."""
    if not args.config:
        return training_config(args, None)
    if Path(args.config).suffix != ".toml":
        return training_config(args, read_train_config(args.config))
    given = {name: value for name, value in vars(args).items() if value is not None}
    return training_config(argparse.Namespace(**{**read_job_file(args.config), **given}), None)

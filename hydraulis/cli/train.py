"""``hydraulis train``: train on synthetic data with step plans, on local processes or under
torchrun (``torchrun --nproc-per-node N -m hydraulis train --config train.json``)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from hydraulis.artifacts import read_train_config, write_train_config
from hydraulis.cli.training_args import add_training_arguments, training_config
from hydraulis.runtime.run import resolve_run


def register(commands: argparse._SubParsersAction) -> None:
    train = commands.add_parser(
        "train", help="train with heterogeneous strategies on local processes or under torchrun",
        description="Train a model preset on synthetic token data (or document lengths from --lengths): "
                    "global batches filled to --token-budget, the --strategy SPECs cycled per step, "
                    "micro-batches planned by the runtime's simple planner. Rank 0 logs one line per "
                    "step: strategy, tokens, loss, measured and predicted ms per pipeline. Without "
                    "torchrun it spawns --nproc local processes; under torchrun (RANK, WORLD_SIZE, ... "
                    "set) this process is one rank: torchrun --nproc-per-node N -m hydraulis train ...")
    train.add_argument("--config", help="training config JSON (kind train_config); flags override it")
    add_training_arguments(train)
    train.add_argument("--output-dir", help="folder to write the resolved config to (train_config.json)")
    train.set_defaults(run=_train)


def _train(args: argparse.Namespace) -> None:
    config = training_config(args, read_train_config(args.config) if args.config else None)
    run = resolve_run(config)
    if args.output_dir and os.environ.get("RANK", "0") == "0":
        write_train_config(Path(args.output_dir) / "train_config.json", config)
    from hydraulis.runtime.launch import RankFailure
    from hydraulis.runtime.trainer import run_training

    try:
        run_training(run, config.runtime, config.nproc, args.log_level)
    except RankFailure as failure:
        sys.stderr.write(f"hydraulis: error: {failure}\n")
        raise SystemExit(1) from None

"""Flags shared by ``hydraulis train`` and ``hydraulis check-equivalence``: what to train, on
which data, how. Every flag defaults to None so that a given flag overrides the config it is
applied to (a config file, or the command's own defaults)."""

from __future__ import annotations

import argparse
from dataclasses import replace

from hydraulis.errors import HydraulisError
from hydraulis.presets import model_names
from hydraulis.runtime.config import DeviceKind, OptimizerKind, Precision, TrainConfig

_TOP = {"model": "model", "strategy": "strategies", "steps": "steps", "token_budget": "token_budget",
        "max_seq_len": "max_seq_len", "micro_batch_tokens": "micro_batch_tokens", "nproc": "nproc",
        "lengths": "lengths_file", "space": "space_file"}
_RUNTIME = ("device", "precision", "optimizer", "lr", "seed", "timeout_s", "threads")


def add_training_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", choices=model_names(), help="model preset, e.g. tiny")
    parser.add_argument("--strategy", action="append", metavar="SPEC",
                        help="strategy SPEC, pipelines joined by '+', each cp,tp,pp[:L1/L2/…][xCOUNT], "
                             "e.g. 1,2,1+1,1,2 or 1,1,2x2; repeat to cycle strategies per step")
    parser.add_argument("--steps", type=int, help="training steps")
    parser.add_argument("--token-budget", type=int, help="tokens per global batch (default 256)")
    parser.add_argument("--max-seq-len", type=int, help="longest sequence, longer documents are cut (default 64)")
    parser.add_argument("--micro-batch-tokens", type=int, help="micro-batch capacity in tokens (default 96)")
    parser.add_argument("--nproc", type=int,
                        help="local processes (default: the most devices a strategy uses); "
                             "under torchrun, its WORLD_SIZE")
    parser.add_argument("--lengths", help="lengths file of document lengths (default: synthetic long tail)")
    parser.add_argument("--space", help="scheme space for predicted times (default: analytic cpu preset)")
    parser.add_argument("--device", choices=[d.value for d in DeviceKind], help="default auto: cuda if available")
    parser.add_argument("--precision", choices=[p.value for p in Precision], help="default fp32")
    parser.add_argument("--optimizer", choices=[o.value for o in OptimizerKind])
    parser.add_argument("--lr", type=float, help="learning rate")
    parser.add_argument("--seed", type=int, help="initial weights and data (default 0)")
    parser.add_argument("--timeout-s", type=float,
                        help="seconds a rank waits for a peer before failing (default 60)")
    parser.add_argument("--threads", type=int, help="CPU threads per process (default 1)")


def training_config(args: argparse.Namespace, base: TrainConfig | None) -> TrainConfig:
    """``base`` (or, when None, the required flags) with every given flag applied."""
    top = {field: _value(args, flag) for flag, field in _TOP.items() if _value(args, flag) is not None}
    if "strategies" in top:
        top["strategies"] = tuple(top["strategies"])
    if base is None:
        for flag, field in (("--model", "model"), ("--strategy", "strategies"), ("--steps", "steps")):
            if field not in top:
                raise HydraulisError(flag, None, "is required (give it, or a --config file)")
        base = TrainConfig(top["model"], top["strategies"], top["steps"])
    runtime = {name: _value(args, name) for name in _RUNTIME if _value(args, name) is not None}
    for name, kind in (("device", DeviceKind), ("precision", Precision), ("optimizer", OptimizerKind)):
        if name in runtime:
            runtime[name] = kind(runtime[name])
    return replace(base, **top, runtime=replace(base.runtime, **runtime))


def _value(args: argparse.Namespace, name: str):
    return getattr(args, name, None)

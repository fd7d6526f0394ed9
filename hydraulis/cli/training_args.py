"""Flags shared by ``hydraulis train`` and ``hydraulis check-equivalence``: what to train, on
which data, how. Every flag defaults to None so that a given flag overrides the config it is
applied to (a config file, or the command's own defaults)."""

from __future__ import annotations

import argparse
from dataclasses import replace

from hydraulis.cli.output import optimizer_layout
from hydraulis.dispatch.synthesis import Synthesise, SynthesisOptions
from hydraulis.errors import HydraulisError
from hydraulis.presets import model_names
from hydraulis.runtime.config import DeviceKind, OptimizerKind, Precision, TrainConfig
from hydraulis.types import BatchingMethod

_TOP = {"model": "model", "strategy": "strategies", "steps": "steps", "token_budget": "token_budget",
        "max_seq_len": "max_seq_len", "micro_batch_tokens": "micro_batch_tokens", "nproc": "nproc",
        "lengths": "lengths_file", "space": "space_file", "proposal": "proposal_file", "method": "method",
        "planner_url": "planner_url", "corpus": "corpus", "tokenizer": "tokenizer", "cache_dir": "cache_dir",
        "optimizer_layout": "optimizer_layout", "checkpoint_dir": "checkpoint_dir",
        "checkpoint_every": "checkpoint_every", "resume": "resume", "tensorboard": "tensorboard_dir",
        "synthesise": "synthesise", "synthesis_evaluations": "synthesis_evaluations"}
_RUNTIME = ("device", "precision", "optimizer", "lr", "seed", "timeout_s", "threads")


def add_training_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", choices=model_names(), help="model preset, e.g. tiny")
    parser.add_argument("--strategy", action="append", metavar="SPEC",
                        help="strategy SPEC, pipelines joined by '+', each cp,tp,pp[:L1/L2/…][[OPTIONS]][xCOUNT] "
                             "with OPTIONS sp (sequence parallelism, tp > 1) and recompute=none|selective|full "
                             "(full:K: the first K layers of each stage, full:K1/K2/…: per stage), "
                             "e.g. 1,2,1+1,1,2, 1,1,2x2 or 1,4,1[sp,recompute=full]x2; repeat to cycle strategies "
                             "per step")
    parser.add_argument("--proposal", help="proposal JSON (hydraulis propose): dispatch picks one of its "
                                           "strategies every step (instead of --strategy)")
    parser.add_argument("--method", choices=[m.value for m in BatchingMethod],
                        help="batching method (default dispatch_balanced_packing, Hydraulis)")
    parser.add_argument("--synthesise", choices=[m.value for m in Synthesise],
                        help="with --proposal: make a strategy for a step when it beats the proposal's, switch "
                             "included, from the proposal's schemes (default proposal), --space's (space) or never "
                             "(off)")
    parser.add_argument("--synthesis-evaluations", type=int, metavar="N",
                        help=f"strategies dispatch may plan per step while synthesising "
                             f"(default {SynthesisOptions.evaluations})")
    parser.add_argument("--planner-url", help="ask a running 'hydraulis serve' at this URL for step plans "
                                              "(default: dispatch in-process)")
    parser.add_argument("--steps", type=int, help="training steps (with --resume: the step count to reach)")
    parser.add_argument("--token-budget", type=int, help="tokens per global batch (default: the proposal's, else 256)")
    parser.add_argument("--max-seq-len", type=int,
                        help="longest piece, longer documents are cut (default: the proposal's, else 64)")
    parser.add_argument("--micro-batch-tokens", type=int,
                        help="micro-batch capacity of --strategy pipelines (default 1.5 × max-seq-len)")
    parser.add_argument("--nproc", type=int,
                        help="local processes (default: the fewest the strategies and the optimizer layout need); "
                             "under torchrun, its WORLD_SIZE")
    parser.add_argument("--corpus", help="train on this corpus (e.g. hydraulis data build-stdlib's JSONL)")
    parser.add_argument("--tokenizer", help="tokenizer.json for --corpus (default: a byte-level BPE of the "
                                            "model's vocabulary, trained on the corpus and cached)")
    parser.add_argument("--cache-dir", help="trained tokenizers and datasets' cache (default ~/.cache/hydraulis)")
    parser.add_argument("--lengths", help="lengths file of synthetic documents (default: a synthetic long tail)")
    parser.add_argument("--space", help="scheme space for the predicted times of --strategy (default: analytic cpu)")
    parser.add_argument("--optimizer-layout", metavar="DP,TP,PP",
                        help="layout of master weights and Adam moments (default: the proposal's, else DP = ranks)")
    parser.add_argument("--device", choices=[d.value for d in DeviceKind], help="default auto: cuda if available")
    parser.add_argument("--precision", choices=[p.value for p in Precision],
                        help="default auto: bf16 on CUDA, fp32 on the CPU; bf16 computes in bf16 with fp32 "
                             "master weights")
    parser.add_argument("--optimizer", choices=[o.value for o in OptimizerKind], help="default adam")
    parser.add_argument("--lr", type=float, help="learning rate (default 1e-3; check-equivalence: 1e-4)")
    parser.add_argument("--seed", type=int, help="initial weights, data order, dispatch ties (default 0)")
    parser.add_argument("--timeout-s", type=float,
                        help="seconds a rank waits for a peer before failing (default 60)")
    parser.add_argument("--threads", type=int, help="CPU threads per process (default 1)")


def add_checkpoint_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint-dir", help="write checkpoints (from the optimizer layout) under this folder")
    parser.add_argument("--checkpoint-every", type=int, help="steps between checkpoints (default 0: at the end only)")
    parser.add_argument("--resume", help="continue from this checkpoint folder, or the newest complete one under "
                                         "this root; strategy, proposal, method and process count may differ")


def training_config(args: argparse.Namespace, base: TrainConfig | None) -> TrainConfig:
    """``base`` (or, when None, the required flags) with every given flag applied."""
    top = {field: _value(args, flag) for flag, field in _TOP.items() if _value(args, flag) is not None}
    if "strategies" in top:
        top["strategies"] = tuple(top["strategies"])
    if "method" in top:
        top["method"] = BatchingMethod(top["method"])
    if "synthesise" in top:
        top["synthesise"] = Synthesise(top["synthesise"])
    if "optimizer_layout" in top:
        top["optimizer_layout"] = optimizer_layout(top["optimizer_layout"])
    if base is None:
        for flag, field in (("--model", "model"), ("--steps", "steps")):
            if field not in top:
                raise HydraulisError(flag, None, "is required (give it, or a --config file)")
        base = TrainConfig(top["model"], top.get("strategies", ()), top["steps"],
                           proposal_file=top.get("proposal_file"))
    elif "proposal_file" in top and "strategies" not in top:
        top["strategies"] = ()
    elif "strategies" in top and "proposal_file" not in top:
        top["proposal_file"] = None
    runtime = {name: _value(args, name) for name in _RUNTIME if _value(args, name) is not None}
    for name, kind in (("device", DeviceKind), ("precision", Precision), ("optimizer", OptimizerKind)):
        if name in runtime:
            runtime[name] = kind(runtime[name])
    return replace(base, **top, runtime=replace(base.runtime, **runtime))


def _value(args: argparse.Namespace, name: str):
    return getattr(args, name, None)

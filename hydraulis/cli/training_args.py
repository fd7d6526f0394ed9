"""Flags shared by ``hydraulis train`` and ``hydraulis check-equivalence``: what to train, on
which data, how. Every flag defaults to None so that a given flag overrides the config it is
applied to (a config file, or the command's own defaults)."""

from __future__ import annotations

import argparse
from dataclasses import replace

from hydraulis import limits
from hydraulis.cli.arguments import Bounded, FileKind, InputFile, OutputPath, optimizer_layout
from hydraulis.dispatch.synthesis import Synthesise, SynthesisOptions
from hydraulis.errors import HydraulisError
from hydraulis.presets import model_names
from hydraulis.job.config import TrainConfig
from hydraulis.job.schedule import LrScheduleKind
from hydraulis.layout.kinds import DeviceKind, OptimizerKind, Precision, ReduceDtype
from hydraulis.types import BatchingMethod

_TOP = {"model": "model", "strategy": "strategies", "steps": "steps", "token_budget": "token_budget",
        "max_seq_len": "max_seq_len", "micro_batch_tokens": "micro_batch_tokens", "nproc": "nproc",
        "lengths": "lengths_file", "space": "space_file", "proposal": "proposal_file", "method": "method",
        "planner_url": "planner_url", "corpus": "corpus", "tokenizer": "tokenizer", "cache_dir": "cache_dir",
        "optimizer_layout": "optimizer_layout", "checkpoint_dir": "checkpoint_dir",
        "checkpoint_every": "checkpoint_every", "keep_checkpoints": "keep_checkpoints", "no_resume": "fresh",
        "overwrite_checkpoints": "overwrite", "resume": "resume", "init_from": "init_from",
        "tensorboard": "tensorboard_dir", "cluster": "cluster_file",
        "synthesise": "synthesise", "synthesis_evaluations": "synthesis_evaluations"}
_RUNTIME = ("device", "precision", "grad_reduce_dtype", "optimizer", "lr", "seed", "timeout_s", "threads",
            "record_operations", "device_memory", "overlap_reduction", "bucket_mb", "allow_math_attention", "betas",
            "eps", "weight_decay", "decay_embeddings", "clip_grad_norm", "lr_schedule", "warmup_steps", "min_lr")


def add_training_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", choices=model_names(),
                        help="model preset, e.g. tiny (train: or the model of --init-from or --resume)")
    parser.add_argument("--strategy", action="append", metavar="SPEC",
                        help="strategy SPEC, pipelines joined by '+', each cp,tp,pp[:L1/L2/…][[OPTIONS]][xCOUNT] "
                             "with OPTIONS sp (sequence parallelism, tp > 1) and recompute=none|selective|full "
                             "(full:K: the first K layers of each stage, full:K1/K2/…: per stage) and, for a "
                             "mixture of experts, ep=N (expert parallelism over N tp ranks, with sp), "
                             "e.g. 1,2,1+1,1,2, 1,1,2x2, 1,4,1[sp,recompute=full]x2 or 1,2,1[sp,ep=2]+1,1,1; repeat to "
                             "cycle strategies per step")
    parser.add_argument("--proposal", type=InputFile(FileKind.PROPOSAL),
                        help="proposal JSON (hydraulis propose): dispatch picks one of its "
                             "strategies every step (instead of --strategy)")
    parser.add_argument("--method", choices=[m.value for m in BatchingMethod],
                        help="batching method (default dispatch_balanced_packing, Hydraulis)")
    parser.add_argument("--synthesise", choices=[m.value for m in Synthesise],
                        help="with --proposal: make a strategy for a step when it beats the proposal's, switch "
                             "included, from the proposal's schemes (default proposal), --space's (space) or never "
                             "(off)")
    parser.add_argument("--synthesis-evaluations", type=Bounded(limits.SYNTHESIS_EVALUATIONS), metavar="N",
                        help=f"strategies dispatch may plan per step while synthesising "
                             f"(default {SynthesisOptions.evaluations})")
    parser.add_argument("--planner-url", help="ask a running 'hydraulis serve' at this URL for step plans "
                                              "(default: dispatch in-process)")
    parser.add_argument("--steps", type=Bounded(limits.TRAINING_STEPS),
                        help="training steps (with --resume: the step count to reach)")
    parser.add_argument("--token-budget", type=Bounded(limits.TOKEN_BUDGET),
                        help="tokens per global batch (default: the proposal's, else 256)")
    parser.add_argument("--max-seq-len", type=Bounded(limits.MAX_SEQ_LEN),
                        help="longest piece, longer documents are cut (default: the proposal's, else 64)")
    parser.add_argument("--micro-batch-tokens", type=Bounded(limits.TOKEN_BUDGET),
                        help="micro-batch capacity of --strategy pipelines (default 1.5 × max-seq-len)")
    parser.add_argument("--nproc", type=Bounded(limits.PROCESSES),
                        help="local processes (default: the fewest the strategies and the optimizer layout need); "
                             "under torchrun, its WORLD_SIZE")
    parser.add_argument("--corpus", type=InputFile(FileKind.CORPUS),
                        help="train on this corpus (e.g. hydraulis data build-stdlib's JSONL)")
    parser.add_argument("--tokenizer", type=InputFile(FileKind.TOKENIZER),
                        help="tokenizer.json for --corpus (default: a byte-level BPE of the "
                             "model's vocabulary, trained on the corpus and cached)")
    parser.add_argument("--cache-dir", type=OutputPath(),
                        help="trained tokenizers and datasets' cache (default ~/.cache/hydraulis)")
    parser.add_argument("--lengths", type=InputFile(FileKind.LENGTHS),
                        help="lengths file of synthetic documents (default: a synthetic long tail)")
    parser.add_argument("--space", type=InputFile(FileKind.SCHEME_SPACE),
                        help="scheme space for the predicted times of --strategy (default: analytic cpu)")
    parser.add_argument("--cluster", type=InputFile(FileKind.CLUSTER),
                        help="mixed cluster description JSON (examples/clusters/a100_h100.json): one process per "
                             "device, numbered group by group; each stage of a staged pipeline runs on its @GROUP's "
                             "ranks, other stages on the first group's")
    parser.add_argument("--optimizer-layout", metavar="DP,TP,PP",
                        help="layout of master weights and Adam moments (default: the proposal's, else DP = ranks)")
    parser.add_argument("--device", choices=[d.value for d in DeviceKind], help="default auto: cuda if available")
    parser.add_argument("--precision", choices=[p.value for p in Precision],
                        help="default auto: bf16 on CUDA, fp32 on the CPU; bf16 computes in bf16 and accumulates "
                             "gradients across micro-batches in fp32, with fp32 master weights and moments")
    parser.add_argument("--grad-reduce-dtype", choices=[d.value for d in ReduceDtype],
                        help="dtype of the gradients sent to the optimizer layout, summed there in fp32 "
                             "(default auto: bf16 on CUDA, fp32 on the CPU, as the cost model prices it by default; "
                             "bf16 halves the reduction's bytes)")
    parser.add_argument("--no-overlap-reduction", dest="overlap_reduction", action="store_false", default=None,
                        help="exchange gradients and weights with the optimizer layout whole, after the backward "
                             "and before the forward, instead of in buckets overlapped with them (design §22)")
    parser.add_argument("--allow-math-attention", action="store_true", default=None,
                        help="on CUDA with a torch without varlen_attn (< 2.12), run attention on the blocked fp32 "
                             "math kernel with a warning instead of failing (several times slower)")
    parser.add_argument("--bucket-mb", type=Bounded(limits.BUCKET_MB), metavar="MIB",
                        help="size of the overlapped reduction's buckets, in MiB of the reduction's dtype "
                             "(default 25, as PyTorch DDP; a bucket also holds at most a quarter of its stage's "
                             "gradients, so a small model's stage has several)")
    parser.add_argument("--optimizer", choices=[o.value for o in OptimizerKind],
                        help="adamw (default; train: PyTorch's AdamW with --betas, --eps, --weight-decay), adam "
                             "(fixed betas 0.9/0.999, no decay; check-equivalence's default) or sgd")
    parser.add_argument("--lr", type=Bounded(limits.LEARNING_RATE),
                        help="peak learning rate (default 1e-3; check-equivalence: 1e-4)")
    parser.add_argument("--betas", type=Bounded(limits.SHARE), nargs=2, metavar=("BETA1", "BETA2"),
                        help="AdamW's moment decay rates, each in [0, 1) (default 0.9 0.95)")
    parser.add_argument("--eps", type=Bounded(limits.ADAM_EPSILON), help="AdamW's epsilon, > 0 (default 1e-8)")
    parser.add_argument("--weight-decay", type=Bounded(limits.WEIGHT_DECAY),
                        help="AdamW's decoupled weight decay, >= 0, on matrices only: never on norms and other "
                             "1-D parameters (default 0.1)")
    parser.add_argument("--decay-embeddings", action=argparse.BooleanOptionalAction, default=None,
                        help="whether the token embedding and the output head are decayed too (default yes)")
    parser.add_argument("--clip-grad-norm", type=Bounded(limits.GRAD_NORM), metavar="NORM",
                        help="clip the gradient to this global norm, > 0, computed once per step in the optimizer "
                             "layout (inf: never clip); a step whose norm is not finite is skipped on every rank "
                             "(default 1.0; check-equivalence: inf)")
    parser.add_argument("--lr-schedule", choices=[k.value for k in LrScheduleKind],
                        help="learning rate per update after warmup: constant, linear or cosine decay from --lr to "
                             "--min-lr over --steps (default cosine; check-equivalence: constant)")
    parser.add_argument("--warmup-steps", type=Bounded(limits.TRAINING_STEPS),
                        help="updates of linear warmup to --lr, at most --steps (default 0)")
    parser.add_argument("--min-lr", type=Bounded(limits.MIN_LEARNING_RATE), help="learning rate the decay ends at, between 0 and --lr (default 0)")
    parser.add_argument("--seed", type=Bounded(limits.SEED),
                        help="initial weights, data order, dispatch ties (default 0)")
    parser.add_argument("--timeout-s", type=Bounded(limits.TIMEOUT_S),
                        help="seconds a rank waits for a peer before failing (default 60)")
    parser.add_argument("--threads", type=Bounded(limits.THREADS), help="CPU threads per process (default 1)")
    parser.add_argument("--record-operations", action="store_true", default=None,
                        help="record every stage's forwards and backwards, in order, with their times, in the "
                             "train log (benchmarks/fidelity.py compares them with the cost model)")
    parser.add_argument("--device-memory", type=Bounded(limits.DEVICE_MEMORY), metavar="BYTES",
                        help="memory budget of every process: a step whose measured peak (CPU: the tensor "
                             "storage the rank holds and creates; CUDA: the allocator's peak) exceeds it on a "
                             "rank fails, naming the step, the rank and the bytes (default: no budget)")


def add_checkpoint_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint-dir", type=OutputPath(),
                        help="write checkpoints (from the optimizer layout) under this folder; a job continues "
                             "from the newest usable checkpoint there by itself (so torchrun --max-restarts N "
                             "restarts go on where they stopped), logging which")
    parser.add_argument("--checkpoint-every", type=Bounded(limits.CHECKPOINT_EVERY),
                        help="steps between checkpoints (default 0: at the end only)")
    parser.add_argument("--keep-checkpoints", type=Bounded(limits.KEEP_CHECKPOINTS), metavar="K",
                        help="keep the newest K complete checkpoints, older ones are removed; a corrupted newest "
                             "one falls back to the previous (default 2)")
    parser.add_argument("--no-resume", action="store_true", default=None,
                        help="start from step 0 even when --checkpoint-dir holds checkpoints (refused unless "
                             "--overwrite-checkpoints)")
    parser.add_argument("--overwrite-checkpoints", action="store_true", default=None,
                        help="with --no-resume: remove the checkpoints already in --checkpoint-dir")
    parser.add_argument("--resume", type=InputFile(FileKind.CHECKPOINT),
                        help="continue from this checkpoint folder, or the newest complete one under "
                             "this root; strategy, proposal, method and process count may differ")
    parser.add_argument("--init-from", metavar="HF_DIR", type=InputFile(FileKind.HF_MODEL),
                        help="start from a Hugging Face Llama directory (config.json and model.safetensors or a "
                             "sharded index): the model comes from its config.json, each rank reads only the "
                             "weights it owns; with --steps 0 --checkpoint-dir C it writes C/step-00000000 "
                             "(a conversion)")


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
        if "steps" not in top:
            raise HydraulisError("--steps", None, "is required (give it, or a --config file)")
        if not {"model", "init_from", "resume"} & top.keys():
            raise HydraulisError("--model", None, "is required (give it, --init-from, --resume or a --config file)")
        base = TrainConfig(top.get("model"), top.get("strategies", ()), top["steps"],
                           proposal_file=top.get("proposal_file"), init_from=top.get("init_from"),
                           resume=top.get("resume"), checkpoint_dir=top.get("checkpoint_dir"))
    else:
        if "init_from" in top and "model" not in top:
            top["model"] = None
        if "proposal_file" in top and "strategies" not in top:
            top["strategies"] = ()
        elif "strategies" in top and "proposal_file" not in top:
            top["proposal_file"] = None
    runtime = {name: _value(args, name) for name in _RUNTIME if _value(args, name) is not None}
    for name, kind in (("device", DeviceKind), ("precision", Precision), ("grad_reduce_dtype", ReduceDtype),
                       ("optimizer", OptimizerKind), ("lr_schedule", LrScheduleKind)):
        if name in runtime:
            runtime[name] = kind(runtime[name])
    if "betas" in runtime:
        runtime["betas"] = tuple(runtime["betas"])
    return replace(base, **top, runtime=replace(base.runtime, **runtime))


def _value(args: argparse.Namespace, name: str):
    return getattr(args, name, None)

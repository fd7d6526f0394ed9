"""``hydraulis check-equivalence``: distributed training against single-device training."""

from __future__ import annotations

import argparse
import math
import sys

from hydraulis.base import limits
from hydraulis.base.errors import HydraulisError
from hydraulis.cli.arguments import Bounded
from hydraulis.cli.output import emit, table
from hydraulis.cli.training_args import add_training_arguments, training_config
from hydraulis.job.config import RuntimeOptions, TrainConfig
from hydraulis.job.schedule import LrScheduleKind
from hydraulis.runtime.run import resolve_run
from hydraulis.sharding.kinds import OptimizerKind, Precision

DEFAULT_RUNTIME = RuntimeOptions(precision=Precision.FP32, optimizer=OptimizerKind.ADAM, lr=1e-4,
                                 clip_grad_norm=math.inf, lr_schedule=LrScheduleKind.CONSTANT)
"""Adam at a constant lr 1e-4, unclipped: each step moves every weight by about 1e-4 (0.5 % of the initial 0.02), while
fp32 rounding amplified by Adam stays below ~1.5e-6 (see :mod:`hydraulis.runtime.equivalence`;
at lr 1e-3 it reaches 1.7e-5); fp32 on every device (bf16 rounding is ~1e-3). A wrong gradient
shows in the first step's gradients whatever the optimizer (Adam hides a gradient's scale from
the weights)."""


def register(commands: argparse._SubParsersAction) -> None:
    check = commands.add_parser(
        "check-equivalence", help="train distributed and on one device, compare the weights",
        description="Train --steps steps with the --strategy SPECs (cycled per step) on --nproc processes and "
                    "on a single process on the same batches from the same initial weights, then compare "
                    "every parameter's gradient after the first step (reduced and gathered to the canonical "
                    "layout) and every parameter after the last: rel = ||x_dist - x_ref|| / ||x_ref|| "
                    "(whole-tensor 2-norms). Prints per-step losses of both sides, max_grad_rel_diff=<max over "
                    "gradients> and, as the last line, max_rel_diff=<the larger of the gradients' and the "
                    "weights' maxima>; exits 1 when it exceeds --tolerance. Defaults: model tiny, 2 steps, Adam "
                    "with a constant lr 1e-4, unclipped. With --optimizer adamw the single process is a plain "
                    "PyTorch loop: torch.optim.AdamW, torch.nn.utils.clip_grad_norm_ and "
                    "torch.optim.lr_scheduler.LambdaLR, and the per-step learning rates and gradient norms are "
                    "compared too.")
    add_training_arguments(check, train=False)
    check.add_argument("--tolerance", type=Bounded(limits.TOLERANCE),
                       help="largest accepted max_rel_diff (default 1e-5, with --precision bf16 5e-2: the distributed "
                            "side computes in bf16, the reference in fp32; see hydraulis.runtime.equivalence)")
    check.set_defaults(run=_check)


def _check(args: argparse.Namespace) -> None:
    if not args.strategy and not args.proposal:
        raise HydraulisError("--strategy", None, "is required: give one or more strategy SPECs, e.g. 1,2,1+1,1,2 "
                                                 "(or a --proposal)")
    base = TrainConfig("tiny", tuple(args.strategy or ()), 2, proposal_file=args.proposal, runtime=DEFAULT_RUNTIME)
    config = training_config(args, base)
    run = resolve_run(config)
    from hydraulis.runtime.equivalence import check_equivalence, default_tolerance
    from hydraulis.runtime.launch import RankFailure

    try:
        result = check_equivalence([run], config.runtime, config.nproc, args.log_level)[0]
    except RankFailure as failure:
        sys.stderr.write(f"hydraulis: error: {failure}\n")
        raise SystemExit(1) from None
    rows = [[r.step, r.strategy, r.tokens, f"{r.loss:.7f}", f"{ref:.7f}", abs(r.loss - ref), f"{r.lr:.4e}",
             f"{r.grad_norm:.6f}", f"{norm:.6f}"]
            for r, ref, norm in zip(result.records, result.reference_losses, result.reference_grad_norms)]
    emit(f"{config.model}, {config.runtime.optimizer.value} lr {config.runtime.lr:g}, seed {config.runtime.seed}")
    emit(table(("step", "strategy", "tokens", "loss", "reference loss", "|difference|", "lr", "grad_norm",
                "reference grad_norm"), rows))
    emit(f"largest difference in {result.worst_parameter}; the weights differ by "
         f"{result.max_weight_rel_diff:.3e}, the updates by {result.update_rel_diff:.3g} of their size")
    emit(f"gradient norms differ by {result.max_grad_norm_rel_diff:.3e} of their size, learning rates by "
         f"{result.max_lr_diff:.3e}")
    emit(f"max_grad_rel_diff={result.max_grad_rel_diff:.3e}")
    emit(f"max_rel_diff={result.max_rel_diff:.3e}")
    tolerance = args.tolerance if args.tolerance is not None else default_tolerance(config.runtime.precision)
    if result.max_rel_diff > tolerance:
        sys.stderr.write(f"hydraulis: error: max_rel_diff {result.max_rel_diff:.3e} exceeds the tolerance "
                         f"{tolerance:g}\n")
        raise SystemExit(1)

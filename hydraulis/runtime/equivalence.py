"""The equivalence check: distributed training against single-device training.

Both sides start from the same seed (so the same initial weights, :mod:`.optimizer.master`), see the same
global batches (:mod:`.data`) and use the same optimizer. The distributed side runs the
configured strategies (cycled per step) or the proposal's on ``nproc`` processes with plans from
the dispatcher, gradients reduced into and weights propagated from the optimizer layout; the
reference runs every batch as one packed micro-batch on one device in this process (optimizer
layout ``dp1·tp1·pp1``, the same update code). Both sides are compared twice, per parameter
tensor ``p`` (norms of whole tensors, computed in float64):

* the **gradients** of the first step, reduced into the optimizer layout and gathered to the
  canonical layout, against the single-process gradient::

The details: :func:`check_equivalence`."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

from hydraulis.job.config import RuntimeOptions
from hydraulis.job.records import StepRecord
from hydraulis.runtime.launch import RankContext, run_job
from hydraulis.runtime.optimizer.master import initial_weights
from hydraulis.runtime.reference import ReferenceRun, StageReference, train_reference
from hydraulis.runtime.run import TrainingRun
from hydraulis.runtime.trainer import train
from hydraulis.sharding.kinds import OptimizerKind, Precision

FP32_TOLERANCE = 1e-5
BF16_TOLERANCE = 5e-2
"""Largest accepted ``max_rel_diff`` per compute precision (:func:`check_equivalence`)."""


def default_tolerance(precision: Precision) -> float:
    return BF16_TOLERANCE if precision is Precision.BF16 else FP32_TOLERANCE


@dataclass(frozen=True)
class EquivalenceResult:
    """One case: per-step losses of both sides and the per-parameter relative differences of
    the first step's gradients and of the final weights."""

    strategies: tuple[str, ...]
    records: tuple[StepRecord, ...]
    reference_losses: tuple[float, ...]
    rel_diff: dict[str, float]
    grad_rel_diff: dict[str, float]
    update_rel_diff: float
    reference_lrs: tuple[float, ...]
    reference_grad_norms: tuple[float, ...]

    @property
    def max_weight_rel_diff(self) -> float:
        return max(self.rel_diff.values())

    @property
    def max_grad_rel_diff(self) -> float:
        return max(self.grad_rel_diff.values())

    @property
    def max_rel_diff(self) -> float:
        return max(self.max_weight_rel_diff, self.max_grad_rel_diff)

    @property
    def worst_parameter(self) -> str:
        """The parameter of ``max_rel_diff``, ``(gradient)`` or ``(weights)`` appended."""
        if self.max_grad_rel_diff >= self.max_weight_rel_diff:
            return max(self.grad_rel_diff, key=self.grad_rel_diff.__getitem__) + " (gradient)"
        return max(self.rel_diff, key=self.rel_diff.__getitem__) + " (weights)"

    @property
    def max_grad_norm_rel_diff(self) -> float:
        """``max_t |‖g_dist‖ − ‖g_ref‖| / ‖g_ref‖`` over the steps: the global norms before clipping."""
        return max(abs(r.grad_norm - ref) / ref for r, ref in zip(self.records, self.reference_grad_norms))

    @property
    def max_lr_diff(self) -> float:
        return max(abs(r.lr - ref) for r, ref in zip(self.records, self.reference_lrs))

    @property
    def max_loss_diff(self) -> float:
        return max(abs(r.loss - ref) for r, ref in zip(self.records, self.reference_losses))


def check_equivalence(runs: Sequence[TrainingRun], options: RuntimeOptions, nproc: int = 0,
                      log_level: str = "warning") -> list[EquivalenceResult]:
    """Train every run distributed (one job of ``nproc`` processes, default: the most devices
    any run needs) and on one device; compare (:func:`check_equivalence`).

          grad_rel(p)       = ‖g_dist(p) − g_ref(p)‖₂ / ‖g_ref(p)‖₂
          max_grad_rel_diff = max_p grad_rel(p)

    * the **weights** after the last step::

          rel(p)              = ‖θ_dist(p) − θ_ref(p)‖₂ / ‖θ_ref(p)‖₂
          max_weight_rel_diff = max_p rel(p)

    and ``max_rel_diff = max(max_grad_rel_diff, max_weight_rel_diff)``. The gradient is the sharp
    test: a bug in the distribution (a norm gradient counted once per tp rank, a missing all-reduce,
    the loss normalised per pipeline, context-parallel chunks out of order, a stage's gradient
    lost) changes some tensor's gradient by O(1) of itself, while the weights after a few steps at
    a small learning rate move by ``~lr`` per step, and Adam hides a gradient's scale (a gradient
    counted twice moves a weight as far as the right one). The fp32 rounding of a gradient summed in
    another order stays ~1e-7 of it. Measured with the defaults of ``hydraulis check-equivalence``
    (tiny, 2 steps, Adam lr 1e-4, ``1,2,1``; ``tests/runtime/test_equivalence_faults_distributed.py``
    injects each bug, each under a strategy that exercises it), ``max_grad_rel_diff`` / weights::

        no fault (1,2,1 · 1,1,1x2 · 2,1,1 · 1,1,2)   7.0e-7 · 2.5e-7 · 3.9e-7 · 2.5e-7 / ≤ 4.5e-7
        norm gradient counted per tp rank (1,2,1)    1.0 / 4.5e-7   (the weights alone miss it)
        tp all-reduce missing in backward (1,2,1)    1.03 / 9.4e-3
        loss normalised per pipeline (1,1,1x2)       1.01 / 1.1e-3
        cp chunks gathered in wrong order (2,1,1)    1.39 / 9.9e-3
        first pp stage's gradient dropped (1,1,2)    1.0 / 7.8e-3

    Because ``rel`` is relative to the weights, it is
    also reported against the training update: ``update_rel_diff = max_p ‖θ_dist − θ_ref‖₂ /
    ‖θ_ref − θ₀‖₂`` over parameters that moved — how far the distributed update is from the
    reference update (it includes the fp32 rounding of the weights themselves, one unit in the last
    place of a weight being up to ~1e-4 of a small update). Per-step losses of both sides are
    reported too.

    The optimizer matters: SGD is linear in the gradient, so a gradient error shows in the weights
    in proportion; Adam divides each element's step by its gradient's running magnitude, which
    hides scale errors (a gradient counted twice changes nothing) and turns the *absolute* fp32
    rounding of a gradient into a *relative* error of the element's step. Both sides compute the
    update with the same elementwise code (:mod:`.optimizer.master`), so all that differs is the order in
    which partial gradients were summed — but where partial gradients nearly cancel (elements with
    ``|g| ≈ 1e-7`` summed from parts of ``1e-3``) that order changes ``g`` by up to 1e-3 of itself,
    and Adam passes that on to the step. It is not the distribution: one process that only cuts the
    batch into three micro-batches differs from the reference by 5.8e-6 (tiny, seed 2, 5 steps,
    Adam lr 1e-3). Measured with the acceptance strategies (``1,2,1+1,1,2``, ``1,1,2x2``,
    ``2,1,1+1,1,1x2`` cycled, 5 steps), seeds 0–5: ``max_rel_diff`` 5.8e-6, 2.6e-6, 1.7e-5, 2.4e-6,
    1.4e-5, 5.3e-6 at lr 1e-3 and 5.7e-7, 2.6e-7, 1.5e-6, 2.2e-7, 3.6e-7, 5.3e-7 at lr 1e-4 (the
    difference scales with the step size, the signal of a wrong gradient too: it moves a weight by
    ``~lr`` per step, ≫ 1e-5 of the weights). ``hydraulis check-equivalence`` therefore runs Adam
    at lr 1e-4 by default.

    **bf16.** With ``--precision bf16`` the distributed side computes in bf16 (weights copied from
    the fp32 masters, activations, the attention, each micro-batch's gradient) and accumulates
    gradients in fp32 (:mod:`.gradients`), while the reference stays fp32: the comparison then
    measures bf16 rounding, 8 significant bits, not the order of sums. Measured on the CPU (tiny,
    Adam lr 1e-4, 3 steps of ``1,2,1[sp]+1,1,2``, ``2,1,1+1,1,1x2``, ``2,2,1[sp,recompute=full]``
    cycled, seeds 0–2, gradients reduced in fp32 / bf16): ``max_grad_rel_diff`` 1.44e-2 / 1.46e-2,
    1.31e-2 / 1.33e-2, 1.34e-2 / — and the weights 6.6e-4–6.9e-4. The documented tolerance,
    :data:`BF16_TOLERANCE` = 5e-2, keeps a factor 3 above that, and every distribution bug of the
    table above shows at ≥ 1.0 in the gradients, a factor 20 beyond it.

    Several cases (each a config of its own strategies) can share one distributed job, which pays
    the process start-up once; each case starts again from the seed's initial weights.

    **AdamW.** With ``--optimizer adamw`` the reference is no longer the runtime on one device but a
    plain PyTorch loop (:mod:`.reference`): ``torch.optim.AdamW`` with the same parameter groups,
    ``torch.nn.utils.clip_grad_norm_`` and ``torch.optim.lr_scheduler.LambdaLR`` over the same
    schedule — so the check covers the global gradient norm computed in the optimizer layout, the
    clipping, the schedule and the update kernels on flat shards as well. Each step's gradient norm
    (before clipping) and learning rate are compared too: ``max_grad_norm_rel_diff`` and
    ``max_lr_diff``. The reported first-step gradients are those after clipping, on both sides.
    """
    with tempfile.TemporaryDirectory(prefix="hydraulis-equivalence-") as folder:
        run_job(_distributed_job, (tuple(runs), options, folder), options, nproc, max(run.devices for run in runs),
                log_level)
        outcomes = [torch.load(Path(folder) / f"case{i}.pt") for i in range(len(runs))]
    results = []
    with _threads(options.threads):
        for run, outcome in zip(runs, outcomes):
            reference = _reference(run, options)
            initial = initial_weights(run.model, options.seed)
            records = tuple(StepRecord(**record) for record in outcome["records"])
            results.append(_compare(run, records, outcome, reference, initial))
    return results


@contextmanager
def _threads(count: int) -> Iterator[None]:
    """The reference runs with the ranks' thread count (more threads than cores slow the tiny
    model's small matrix products tenfold)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _reference(run: TrainingRun, options: RuntimeOptions) -> ReferenceRun:
    """AdamW: the plain PyTorch loop of :mod:`.reference`; SGD and Adam: the runtime on one device
    (the same elementwise update code, :func:`check_equivalence`)."""
    if options.optimizer is OptimizerKind.ADAMW:
        return train_reference(run, options, StageReference(run.model, options.seed))
    result = train(RankContext.single(replace(options, precision=Precision.FP32)), run, options, reference=True,
                   canonical=True)
    return ReferenceRun(tuple(r.loss for r in result.records), tuple(r.lr for r in result.records),
                        tuple(r.grad_norm for r in result.records), result.grads, result.params)


def _distributed_job(context: RankContext, runs: tuple[TrainingRun, ...], options: RuntimeOptions, folder: str) -> None:
    for index, run in enumerate(runs):
        result = train(context, run, options, canonical=True)
        if context.rank == 0:
            outcome = {"params": result.params, "grads": result.grads, "records": [asdict(r) for r in result.records]}
            torch.save(outcome, Path(folder) / f"case{index}.pt")


def _compare(run: TrainingRun, records: tuple[StepRecord, ...], outcome: dict, reference: ReferenceRun,
             initial: dict[str, torch.Tensor]) -> EquivalenceResult:
    params, update = outcome["params"], 0.0
    for name, ref in reference.params.items():
        moved = (ref.double() - initial[name].double()).norm().item()
        if moved > 0:
            update = max(update, (params[name].double() - ref.double()).norm().item() / moved)
    return EquivalenceResult(tuple(str(layout) for layout in run.layouts), records,
                             reference.losses, _relative(params, reference.params),
                             _relative(outcome["grads"], reference.grads), update, reference.lrs,
                             reference.grad_norms)


def _relative(ours: dict[str, torch.Tensor], reference: dict[str, torch.Tensor]) -> dict[str, float]:
    """``‖ours − reference‖₂ / ‖reference‖₂`` per tensor, in float64."""
    rel = {}
    for name, ref in reference.items():
        diff = (ours[name].double() - ref.double()).norm().item()
        rel[name] = diff / max(ref.double().norm().item(), torch.finfo(torch.float64).tiny)
    return rel

"""The equivalence check's single-process side under AdamW: a plain PyTorch training loop.

No part of the runtime's optimizer is used — no optimizer layout, route, buffer or update
code: the whole model sits on one device as ordinary parameters (:class:`StageReference`: one
stage of tp 1, whose parameters are the canonical tensors; or any :class:`ReferenceModel`, e.g.
``transformers``' ``LlamaForCausalLM`` in the tests), started from the seed's initial weights,
and every step is the textbook recipe on the same global batch as the distributed run::

    loss = Σ ℓ_t / N                        every document of the batch, N loss tokens
    loss.backward()
    ‖g‖ = torch.nn.utils.clip_grad_norm_(parameters, clip)
    if ‖g‖ is finite:  optimizer.step(); scheduler.step()     (else the step is skipped)

with ``optimizer = torch.optim.AdamW`` over two parameter groups — the decayed ones with the
job's weight decay, the rest with none (:func:`~.optimizer.master.decays`) — and ``scheduler =
torch.optim.lr_scheduler.LambdaLR(optimizer, schedule.factor)`` (:mod:`hydraulis.job.schedule`).
It reports each step's loss, learning rate and ``‖g‖``, the first step's clipped gradient and
the final weights, by canonical name.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
from torch.optim.lr_scheduler import LambdaLR

from hydraulis.base.types import ModelSpec, Scheme
from hydraulis.job.config import RuntimeOptions
from hydraulis.runtime.model.decoder import StageModel
from hydraulis.runtime.model.packing import Documents, pack_micro_batch
from hydraulis.runtime.optimizer.master import decays, initial_weights
from hydraulis.runtime.parallel.group import ParallelGroup
from hydraulis.runtime.planning import single_device_plan
from hydraulis.runtime.run import TrainingRun
from hydraulis.sharding.parameters import parameter_specs
from hydraulis.sharding.pipeline import PipelineSplit

CPU = torch.device("cpu")


class ReferenceModel(Protocol):
    """A whole model on one device."""

    def parameters_by_name(self) -> dict[str, torch.nn.Parameter]:
        """Every parameter by its canonical name (:func:`~hydraulis.sharding.parameters.parameter_specs`)."""

    def loss(self, documents: Documents, lengths: Sequence[int]) -> torch.Tensor:
        """``Σ ℓ_t / N`` over the batch's documents (token tensors of ``length + 1``)."""


@dataclass(frozen=True)
class ReferenceRun:
    """Per step: the loss, the learning rate and the gradient norm before clipping; the first
    step's gradient after clipping and the final weights, by canonical name (CPU)."""

    losses: tuple[float, ...]
    lrs: tuple[float, ...]
    grad_norms: tuple[float, ...]
    grads: dict[str, torch.Tensor]
    params: dict[str, torch.Tensor]


class StageReference:
    """Our decoder as one stage of one rank (tp 1), every batch one packed micro-batch, from the
    initial weights of ``seed``."""

    def __init__(self, model: ModelSpec, seed: int) -> None:
        single = ParallelGroup.single()
        self.module = StageModel(model, PipelineSplit(Scheme(1, 1, 1), (model.layers,)), 0, single, single,
                                 torch.float32, CPU)
        initial = initial_weights(model, seed)
        with torch.no_grad():
            for name, param in self.module.named_parameters():
                param.copy_(initial[name])

    def parameters_by_name(self) -> dict[str, torch.nn.Parameter]:
        return dict(self.module.named_parameters())

    def loss(self, documents: Documents, lengths: Sequence[int]) -> torch.Tensor:
        plan = single_device_plan(lengths)
        batch = pack_micro_batch(documents, plan.pipelines[0].micro_batches[0], plan.alignment,
                                 ParallelGroup.single(), CPU)
        self.module.count_loss_tokens(sum(lengths))
        return self.module(None, batch).sum() / sum(lengths)


def train_reference(run: TrainingRun, options: RuntimeOptions, model: ReferenceModel) -> ReferenceRun:
    """The module docstring's loop over ``run``'s first ``run.steps`` batches."""
    params = model.parameters_by_name()
    specs = {spec.name: spec for spec in parameter_specs(run.model)}
    groups = [{"params": [p for name, p in params.items() if decays(specs[name], options) is decay],
               "weight_decay": options.weight_decay if decay else 0.0} for decay in (True, False)]
    optimizer = torch.optim.AdamW(groups, lr=options.lr, betas=options.betas, eps=options.eps, foreach=True)
    scheduler = LambdaLR(optimizer, options.schedule(run.steps).factor)
    losses, lrs, norms, grads = [], [], [], None
    for _, batch in zip(range(run.steps), run.data.batches()):
        optimizer.zero_grad(set_to_none=True)
        loss = model.loss(batch.documents, batch.lengths)
        loss.backward()
        norm = float(torch.nn.utils.clip_grad_norm_(list(params.values()), options.clip_grad_norm))
        losses.append(loss.item())
        lrs.append(optimizer.param_groups[0]["lr"])
        norms.append(norm)
        if grads is None:
            grads = {name: p.grad.detach().clone() for name, p in params.items()}
        if math.isfinite(norm):
            optimizer.step()
            scheduler.step()
    return ReferenceRun(tuple(losses), tuple(lrs), tuple(norms), grads,
                        {name: p.detach().clone() for name, p in params.items()})

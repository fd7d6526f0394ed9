"""fp32 master weights and optimizer states of one rank's share of the optimizer layout.

Each rank keeps only its **buffer** of the optimizer layout (:mod:`.placement`): flat fp32
tensors of the master weights ``θ``, of the reduced gradient ``g`` and, for Adam, of the moments
``m`` and ``v`` — ``12`` (SGD: ``4``) bytes per owned element besides the gradient, ZeRO-1 style,
whatever strategy computes the step (the compute layout's weights are copies in the compute
dtype, refreshed every step by :mod:`.routes`).

The details: :class:`OptimizerShard`."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import torch
from torch.optim.adamw import adamw

from hydraulis.base.types import ModelSpec
from hydraulis.job.config import RuntimeOptions
from hydraulis.job.schedule import LrSchedule
from hydraulis.runtime.optimizer.clipping import clip_coefficient
from hydraulis.runtime.parallel.group import ParallelGroup
from hydraulis.sharding.kinds import OptimizerKind
from hydraulis.sharding.ownership import OptimizerOwnership
from hydraulis.sharding.parameters import Holder, ParameterSpec, parameter_specs
from hydraulis.sharding.ranges import Region, overlap

INIT_STD = 0.02
BETAS = (0.9, 0.999)
EPS = 1e-8
STATE_NAMES = {OptimizerKind.SGD: ("master",), OptimizerKind.ADAM: ("master", "exp_avg", "exp_avg_sq"),
               OptimizerKind.ADAMW: ("master", "exp_avg", "exp_avg_sq")}
"""The flat tensors a buffer keeps per optimizer (and writes to checkpoints)."""


@dataclass(frozen=True)
class Update:
    """What one step did to the buffer: the learning rate of the update, the global gradient
    norm before clipping, and whether the update was skipped (a non-finite norm)."""

    lr: float
    grad_norm: float
    skipped: bool


class OptimizerShard:
    """This rank's buffer: ``master`` (θ), ``grad`` (g) and the optimizer's moments, flat fp32;
    ``initialise`` False leaves the weights unset (e.g. to count bytes on the ``meta`` device).

    Every step, after the reduction, the global gradient norm ``‖g‖`` (:mod:`.clipping`, one all-reduce)
    decides: non-finite on any rank, every rank **skips** the update (weights and moments untouched,
    the step count unchanged, a counter of skipped steps incremented); else the gradient is clipped
    to ``clip_grad_norm`` and the update ``k = steps`` (counting from 0) runs at the schedule's
    learning rate ``η = η_k`` (:mod:`hydraulis.job.schedule`); then ``steps`` counts it. Update rules
    (``k + 1`` in the bias corrections)::

        SGD:    θ ← θ − (g·η)
        Adam:   m ← m·β₁ + g·(1 − β₁)                              β₁ = 0.9, β₂ = 0.999, ε = 1e-8
                v ← v·β₂ + (g·g)·(1 − β₂)
                θ ← θ − (m/(1 − β₁ᵏ⁺¹)) / (√(v/(1 − β₂ᵏ⁺¹)) + ε) · η
        AdamW:  θ ← θ·(1 − η·λ)                                    λ = weight_decay on decayed parameters, else 0
                then Adam's update with the job's β₁, β₂, ε   (Loshchilov & Hutter 2019)

    AdamW runs PyTorch's own kernels — the functional ``torch.optim.adamw.adamw``, ``foreach`` on the
    CPU and ``fused`` on CUDA — on views of the flat buffers, one list per parameter group (decayed
    or not, :func:`decays`), one view per region of the buffer: no temporaries of the buffer's size
    beyond the kernels' own. SGD and Adam are computed by hand, every operation a separate, correctly
    rounded elementwise operation (no fused multiply-add, no ``lerp``/``addcdiv``), so an element's
    update depends on its own values only — not on the length of the buffer or where the element
    sits in it: a distributed run and the single-device reference given equal gradients compute
    bit-identical updates, and what differs between them is the order in which partial gradients
    were summed (the equivalence measurements of :mod:`hydraulis.runtime.equivalence` rest on it).
    PyTorch's AdamW differs from the same formula by rounding only.

    Initialisation is a function of the seed only, so every layout and the single-device reference
    start equal: norm weights 1, every matrix ``N(0, 0.02²)`` (GPT-2 / Llama) drawn on the CPU from a
    generator seeded by ``(seed, parameter index)``; a rank draws the parameters it owns part of and
    keeps its part.
    """

    def __init__(self, placement: OptimizerOwnership, rank: int, options: RuntimeOptions,
                 device: torch.device, initialise: bool = True) -> None:
        self.placement, self.rank, self.options = placement, rank, options
        self.regions = placement.owned_regions(rank)
        size = placement.buffer_size(rank)
        self.tensors = {name: torch.zeros(size, dtype=torch.float32, device=device)
                        for name in STATE_NAMES[options.optimizer]}
        self.grad = torch.zeros(size, dtype=torch.float32, device=device)
        self.steps = 0
        self.skipped = 0
        self.version = 0
        """Counts the writes of ``master`` (updates, loads, :meth:`written`): a copy of the
        weights made at one version is current while it lasts."""
        self.groups = {decay: [slice(r.offset + r.lo, r.offset + r.hi) for r in self.regions
                               if decays(r.spec, options) is decay] for decay in (True, False)}
        if initialise:
            self._initialise()

    @property
    def nbytes(self) -> int:
        """Bytes of the buffer's tensors: the master weights, the moments and the gradient."""
        return sum(t.numel() * t.element_size() for t in (*self.tensors.values(), self.grad))

    @property
    def master(self) -> torch.Tensor:
        return self.tensors["master"]

    def buffer(self, name: str) -> torch.Tensor:
        """``grad`` (the last reduced gradient) or one of ``tensors`` by name."""
        return self.grad if name == "grad" else self.tensors[name]

    def step(self, grad_norm: torch.Tensor, schedule: LrSchedule) -> Update:
        """Skip, or clip and update ``master`` with ``grad`` (:class:`OptimizerShard`); ``grad_norm`` is
        the global norm of :mod:`.clipping` (reading it is where the host waits for the reduction)."""
        norm, lr = float(grad_norm), schedule.lr_at(self.steps)
        if not math.isfinite(norm):
            self.skipped += 1
            return Update(lr, norm, True)
        coefficient = clip_coefficient(norm, self.options.clip_grad_norm)
        if coefficient < 1.0:
            self.grad.mul_(coefficient)
        self.steps += 1
        self.version += 1
        if self.options.optimizer is OptimizerKind.ADAMW:
            self._adamw(lr)
        else:
            self._by_hand(lr)
        return Update(lr, norm, False)

    def _by_hand(self, lr: float) -> None:
        theta, g = self.master, self.grad
        if self.options.optimizer is OptimizerKind.SGD:
            theta.sub_(g * lr)
            return
        (beta1, beta2), m, v = BETAS, self.tensors["exp_avg"], self.tensors["exp_avg_sq"]
        m.mul_(beta1).add_(g * (1.0 - beta1))
        v.mul_(beta2).add_((g * g) * (1.0 - beta2))
        m_hat = m / (1.0 - beta1 ** self.steps)
        v_hat = v / (1.0 - beta2 ** self.steps)
        theta.sub_(m_hat / (v_hat.sqrt() + EPS) * lr)

    def _adamw(self, lr: float) -> None:
        """PyTorch's AdamW on the views of each parameter group (``steps`` already counts this update)."""
        options, fused = self.options, self.master.device.type == "cuda"
        for decay, pieces in self.groups.items():
            if not pieces:
                continue
            params, grads, exp_avgs, exp_avg_sqs = ([self.buffer(name)[piece] for piece in pieces]
                                                    for name in ("master", "grad", "exp_avg", "exp_avg_sq"))
            counts = [torch.full((), float(self.steps - 1), device=self.master.device if fused else "cpu")
                      for _ in pieces]
            adamw(params, grads, exp_avgs, exp_avg_sqs, [], counts,
                  foreach=not fused, fused=fused or None, amsgrad=False, beta1=options.betas[0],
                  beta2=options.betas[1], lr=lr, weight_decay=options.weight_decay if decay else 0.0,
                  eps=options.eps, maximize=False)

    def load(self, tensors: Mapping[str, torch.Tensor], steps: int, skipped: int) -> None:
        """Replace the buffer's tensors (from a checkpoint), the step count and the skipped steps."""
        for name, tensor in self.tensors.items():
            tensor.copy_(tensors[name])
        self.steps, self.skipped = steps, skipped
        self.written()

    def written(self) -> None:
        """``master`` was written from outside (e.g. imported weights): copies of it are stale."""
        self.version += 1

    def _initialise(self) -> None:
        for region in self.regions:
            index = self.placement.specs.index(region.spec)
            full = initial_value(region.spec, index, self.options.seed).reshape(-1)
            for block in overlap(Region.whole(region.spec), region):
                block.b_view(self.master).copy_(block.a_view(full))


def decays(spec: ParameterSpec, options: RuntimeOptions) -> bool:
    """Whether AdamW decays ``spec``: a matrix (never a norm or other 1-D parameter), the token
    embedding and the output head only with ``decay_embeddings``."""
    return len(spec.shape) > 1 and (options.decay_embeddings or spec.holder is Holder.LAYER)


def initial_value(spec: ParameterSpec, index: int, seed: int) -> torch.Tensor:
    """Parameter ``spec`` (canonical position ``index``) at initialisation, full shape, on the CPU."""
    if spec.tp_dim is None and len(spec.shape) == 1:
        return torch.ones(spec.shape)
    state = int(np.random.SeedSequence([seed, index]).generate_state(1, np.uint64)[0] >> np.uint64(1))
    return torch.randn(spec.shape, generator=torch.Generator().manual_seed(state)) * INIT_STD


def initial_weights(model: ModelSpec, seed: int) -> dict[str, torch.Tensor]:
    """Every parameter at initialisation, full shape, on the CPU (the reference's starting point)."""
    return {spec.name: initial_value(spec, index, seed) for index, spec in enumerate(parameter_specs(model))}


def gather_canonical(shard: OptimizerShard, name: str, world: ParallelGroup) -> dict[str, torch.Tensor]:
    """Every rank's ``name`` tensor (e.g. ``master``, or ``grad``) assembled into full canonical tensors on
    the CPU, on every rank — one all-gather of ``P`` elements per rank: for checks and small
    models, not for training at scale (checkpoints are written per buffer instead)."""
    placement = shard.placement
    sizes = [placement.buffer_size(r) for r in range(world.size)]
    padded = torch.zeros(max(sizes), dtype=torch.float32, device=shard.master.device)
    padded[:sizes[world.rank]].copy_(shard.buffer(name))
    every = world.all_gather(padded.unsqueeze(0)).cpu()
    return assemble_canonical(placement, lambda rank: every[rank])


def assemble_canonical(placement: OptimizerOwnership, buffer: Callable[[int], torch.Tensor]) -> dict[str, torch.Tensor]:
    """Full canonical tensors (CPU) from every owner's buffer, ``buffer(rank)``."""
    full = {spec.name: torch.empty(spec.numel, dtype=torch.float32) for spec in placement.specs}
    for rank in range(placement.owners):
        values = buffer(rank)
        for region in placement.owned_regions(rank):
            for block in overlap(region, Region.whole(region.spec)):
                block.b_view(full[region.spec.name]).copy_(block.a_view(values))
    return {spec.name: full[spec.name].view(spec.shape) for spec in placement.specs}

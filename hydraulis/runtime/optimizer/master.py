"""fp32 master weights and optimizer states of one rank's share of the optimizer layout.

Each rank keeps only its **buffer** of the optimizer layout (:mod:`.placement`): flat fp32
tensors of the master weights ``θ``, of the reduced gradient ``g`` and, for Adam, of the moments
``m`` and ``v`` — ``12`` (SGD: ``4``) bytes per owned element besides the gradient, ZeRO-1 style,
whatever strategy computes the step (the compute layout's weights are copies in the compute
dtype, refreshed every step by :mod:`.routes`).

Update rules, element by element (Kingma & Ba 2015 for Adam; β₁ = 0.9, β₂ = 0.999,
ε = 1e-8, no weight decay; step ``k`` counts from 1)::

    SGD:   θ ← θ − (g·η)
    Adam:  m ← m·β₁ + g·(1 − β₁)
           v ← v·β₂ + (g·g)·(1 − β₂)
           θ ← θ − (m/(1 − β₁ᵏ)) / (√(v/(1 − β₂ᵏ)) + ε) · η

Every operation is a separate, correctly rounded elementwise operation (no fused
multiply-add, no ``lerp``/``addcdiv``), so an element's update depends on its own values only —
not on the length of the buffer or where the element sits in it: a distributed run and the
single-device reference given equal gradients compute bit-identical updates, and what differs
between them is the order in which partial gradients were summed. (``torch.optim.Adam`` computes
the same formula with fused kernels, equal up to rounding.)

Initialisation is a function of the seed only, so every layout and the single-device reference
start equal: norm weights 1, every matrix ``N(0, 0.02²)`` (GPT-2 / Llama) drawn on the CPU from a
generator seeded by ``(seed, parameter index)``; a rank draws the parameters it owns part of and
keeps its part.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import torch

from hydraulis.job.config import RuntimeOptions

from hydraulis.layout.kinds import OptimizerKind
from hydraulis.runtime.parallel.group import ParallelGroup
from hydraulis.layout.optimizer_placement import OptimizerPlacement
from hydraulis.layout.ranges import Region, overlap
from hydraulis.layout.sharding import ParameterSpec, parameter_specs
from hydraulis.types import ModelSpec

INIT_STD = 0.02
BETAS = (0.9, 0.999)
EPS = 1e-8
STATE_NAMES = {OptimizerKind.SGD: ("master",), OptimizerKind.ADAM: ("master", "exp_avg", "exp_avg_sq")}
"""The flat tensors a buffer keeps per optimizer (and writes to checkpoints)."""


class OptimizerShard:
    """This rank's buffer: ``master`` (θ), ``grad`` (g) and the optimizer's moments, flat fp32;
    ``initialise`` False leaves the weights unset (e.g. to count bytes on the ``meta`` device)."""

    def __init__(self, placement: OptimizerPlacement, rank: int, options: RuntimeOptions,
                 device: torch.device, initialise: bool = True) -> None:
        self.placement, self.rank, self.options = placement, rank, options
        self.regions = placement.owned_regions(rank)
        size = placement.buffer_size(rank)
        self.tensors = {name: torch.zeros(size, dtype=torch.float32, device=device)
                        for name in STATE_NAMES[options.optimizer]}
        self.grad = torch.zeros(size, dtype=torch.float32, device=device)
        self.steps = 0
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

    def step(self) -> None:
        """One update of ``master`` with ``grad`` (module docstring)."""
        self.steps += 1
        theta, g, lr = self.master, self.grad, self.options.lr
        if self.options.optimizer is OptimizerKind.SGD:
            theta.sub_(g * lr)
            return
        (beta1, beta2), m, v = BETAS, self.tensors["exp_avg"], self.tensors["exp_avg_sq"]
        m.mul_(beta1).add_(g * (1.0 - beta1))
        v.mul_(beta2).add_((g * g) * (1.0 - beta2))
        m_hat = m / (1.0 - beta1 ** self.steps)
        v_hat = v / (1.0 - beta2 ** self.steps)
        theta.sub_(m_hat / (v_hat.sqrt() + EPS) * lr)

    def load(self, tensors: Mapping[str, torch.Tensor], steps: int) -> None:
        """Replace the buffer's tensors (from a checkpoint) and the step count."""
        for name, tensor in self.tensors.items():
            tensor.copy_(tensors[name])
        self.steps = steps

    def _initialise(self) -> None:
        for region in self.regions:
            index = self.placement.specs.index(region.spec)
            full = initial_value(region.spec, index, self.options.seed).reshape(-1)
            for block in overlap(Region.whole(region.spec), region):
                block.b_view(self.master).copy_(block.a_view(full))


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


def assemble_canonical(placement: OptimizerPlacement, buffer: Callable[[int], torch.Tensor]) -> dict[str, torch.Tensor]:
    """Full canonical tensors (CPU) from every owner's buffer, ``buffer(rank)``."""
    full = {spec.name: torch.empty(spec.numel, dtype=torch.float32) for spec in placement.specs}
    for rank in range(placement.owners):
        values = buffer(rank)
        for region in placement.owned_regions(rank):
            for block in overlap(region, Region.whole(region.spec)):
                block.b_view(full[region.spec.name]).copy_(block.a_view(values))
    return {spec.name: full[spec.name].view(spec.shape) for spec in placement.specs}

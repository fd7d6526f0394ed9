"""fp32 master weights and the optimizer that updates them.

For this runtime every rank keeps a full fp32 copy of the canonical parameters
(:func:`hydraulis.runtime.sharding.parameter_specs`) and steps an identical optimizer on the
identical reduced gradient, so the copies stay equal; each step copies the shards its compute
layout needs out of them (:meth:`hydraulis.runtime.model.StageModel.load`). Because the copy is
whole, any strategy can compute any step: switching strategy is re-slicing, never a restart.
(A sharded, ZeRO-1 style optimizer layout replaces the full copy in the next step of the
project.)

Initialisation is a function of the seed only, so all ranks and the single-device reference
start equal: norm weights 1, every matrix ``N(0, 0.02²)`` (GPT-2 / Llama), drawn on the CPU in
canonical order from one generator.
"""

from __future__ import annotations

import torch
from torch import nn

from hydraulis.runtime.config import OptimizerKind
from hydraulis.runtime.sharding import parameter_specs
from hydraulis.types import ModelSpec

INIT_STD = 0.02


class MasterWeights:
    """``params``: canonical name → fp32 ``nn.Parameter`` of full shape, on ``device``."""

    def __init__(self, model: ModelSpec, seed: int, device: torch.device) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.params: dict[str, nn.Parameter] = {}
        for spec in parameter_specs(model):
            if spec.tp_dim is None and len(spec.shape) == 1:
                value = torch.ones(spec.shape)
            else:
                value = torch.randn(spec.shape, generator=generator) * INIT_STD
            self.params[spec.name] = nn.Parameter(value.to(device))

    def state(self) -> dict[str, torch.Tensor]:
        """A CPU copy of every parameter."""
        return {name: p.detach().cpu().clone() for name, p in self.params.items()}


def make_optimizer(kind: OptimizerKind, params: list[nn.Parameter], lr: float) -> torch.optim.Optimizer:
    """SGD (no momentum) or Adam (β = (0.9, 0.999), ε = 1e-8, no weight decay)."""
    if kind is OptimizerKind.SGD:
        return torch.optim.SGD(params, lr=lr)
    return torch.optim.Adam(params, lr=lr)

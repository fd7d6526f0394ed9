"""A stand-in for the neighbours of a pipeline stage the profiler measures alone
(:mod:`.measure`): the stage runs its 1F1B operations as if it had neighbours, with random
inputs and gradients of the shapes the schedule asks for, and what it sends goes nowhere."""

from __future__ import annotations

import torch

from hydraulis.runtime.launch import RankContext
from hydraulis.runtime.model.decoder import StageModel


class LoopbackLink:
    """Stands in for the neighbours of a stage measured alone: its input (unless it embeds) and
    its output gradient (unless it computes the loss) are N(0, 1) tensors of the shapes the
    schedule asks for, what it sends goes nowhere."""

    def __init__(self, model: StageModel, context: RankContext, seed: int) -> None:
        self.model, self.device, self.dtype = model, context.device, context.dtype
        self.generator = torch.Generator(device=context.device).manual_seed(seed)

    def recv_forward(self, shape: tuple[int, ...]) -> torch.Tensor | None:
        return None if self.model.first else self._random(shape)

    def send_forward(self, activation: torch.Tensor | None) -> None:
        return None

    def recv_backward(self, shape: tuple[int, ...]) -> torch.Tensor | None:
        return None if self.model.last else self._random(shape)

    def send_backward(self, grad: torch.Tensor | None) -> None:
        return None

    def send_forward_recv_backward(self, activation: torch.Tensor | None,
                                   shape: tuple[int, ...]) -> torch.Tensor | None:
        return self.recv_backward(shape)

    def send_backward_recv_forward(self, grad: torch.Tensor | None, shape: tuple[int, ...]) -> torch.Tensor | None:
        return self.recv_forward(shape)

    def _random(self, shape: tuple[int, ...]) -> torch.Tensor:
        return torch.randn(shape, generator=self.generator, device=self.device, dtype=self.dtype)

"""The step's loss, normalised by the loss tokens of the whole global batch.

With ``ℓ_t`` the cross-entropy of token ``t`` and ``N`` the number of tokens with a label in the
global batch (every position of every sequence: ``N = Σ_i s_i``, see
:mod:`hydraulis.runtime.model.packing`)::

    L = (1/N) · Σ_t ℓ_t = Σ_pipelines Σ_micro-batches Σ_{cp ranks} (1/N) · Σ_{t ∈ part} ℓ_t

Each rank back-propagates its part ``(1/N)·Σ ℓ_t`` and the gradient reduction sums the parts,
so the gradient is ``∇L`` however the batch is cut into pipelines, micro-batches and cp chunks.
(Normalising per micro-batch, ``mean`` of each, would weight a token by ``1/|mb|`` and change
with the packing.) Worked example: sequences of 3 and 5 tokens in two micro-batches give
``N = 8`` and ``L = (ℓ₁+…+ℓ₃)/8 + (ℓ₄+…+ℓ₈)/8``, the single-device mean over 8 tokens.
"""

from __future__ import annotations

import torch

from hydraulis.base.types import StepPlan


def loss_tokens(plan: StepPlan) -> int:
    """``N``: every sequence's length summed over all pipelines of the step."""
    return int(plan.pipelines.micro_batches.lengths.sum())


def part_loss(token_losses: torch.Tensor, loss_tokens: int) -> torch.Tensor:
    """``(1/N)·Σ ℓ_t`` of this rank's tokens (padding tokens have ``ℓ_t = 0``)."""
    return token_losses.sum() / loss_tokens

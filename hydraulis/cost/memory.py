"""Memory per device of a scheme under an optimizer layout, and the longest sequence it holds.

For compute scheme ``(cp, tp, pp)`` and optimizer layout ``(dp_o, tp_o, pp_o)`` (design §4;
the original system's formula, README of the reference pools):

    states = ⌈L/pp⌉·B_layer·(1 − α)/tp + ⌈L/pp_o⌉·B_layer·α/(tp_o·dp_o)
           + n(pp)·B_emb·(1 − α)/tp + n(pp_o)·B_emb·α/(tp_o·dp_o)
    n(p)   = 2 if p = 1 else 1            (embedding and head on one stage, or one each)
    free   = M − safety − overhead − states
    S_max  = ⌊free / m_tok⌋

``B_layer``/``B_emb`` are one layer's / one ``V×H`` matrix's unsharded model-state bytes, α the
share (fp32 master + Adam ≈ 12 of 16 bytes/param) that follows the optimizer layout, ``m_tok`` the
scheme's activation bytes per token on its most loaded device (the first 1F1B stage keeps ``pp``
micro-batches of ``L/pp`` layers, so ``m_tok = L·(H/tp)·A_tp/cp``). ``S_max`` bounds both the
longest sequence and a micro-batch's tokens.

Worked example, reference LLaMA-7B pool (``B = 210·H²``, α = 0.75, H = 4096, L = 32, V = 30592,
``A_tp1 = 38``), scheme (1,1,2), layout dp8·tp4·pp1: states ≈ 14.09 + 2.64 + 0.50 + 0.09 = 17.33 GB;
free = 85.20 − 6.44 − 5.24 − 17.33 = 56.18 GB; ``m_tok = 32·4096·38 ≈ 4.98 MB`` → ``S_max ≈ 11,279``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from hydraulis.types import MemoryModel, OptimizerLayout, SchemeProfile, SchemeSpace


class MemoryLimit(str, Enum):
    """What bounds a scheme's longest sequence."""

    ACTIVATIONS = "activation memory"
    MODEL_STATES = "model states exceed device memory"


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes per device of one scheme under one optimizer layout."""

    compute_states: float
    optimizer_states: float
    overhead: float
    safety_margin: float
    activation_per_token: float
    device_memory: float

    @property
    def states(self) -> float:
        return self.compute_states + self.optimizer_states

    @property
    def free_for_activations(self) -> float:
        return self.device_memory - self.safety_margin - self.overhead - self.states

    @property
    def max_seq_len(self) -> int:
        return max(0, math.floor(self.free_for_activations / self.activation_per_token))

    @property
    def limit(self) -> MemoryLimit:
        return MemoryLimit.ACTIVATIONS if self.max_seq_len > 0 else MemoryLimit.MODEL_STATES

    def used_bytes(self, tokens: int) -> float:
        """Bytes in use when the largest micro-batch holds ``tokens`` tokens (safety excluded)."""
        return self.states + self.overhead + self.activation_per_token * tokens

    def headroom_bytes(self, tokens: int) -> float:
        """Bytes left free beyond the safety margin with micro-batches of ``tokens`` tokens."""
        return self.free_for_activations - self.activation_per_token * tokens


def memory_breakdown(
    memory: MemoryModel, layers: int, profile: SchemeProfile, layout: OptimizerLayout
) -> MemoryBreakdown:
    """The terms of the module docstring's formula for ``profile`` under ``layout``."""
    scheme, alpha = profile.scheme, memory.sharded_state_fraction
    optimizer_shards = layout.tp * layout.dp
    compute = (math.ceil(layers / scheme.pp) * memory.layer_state_bytes
               + _embedding_matrices(scheme.pp) * memory.embedding_state_bytes) * (1.0 - alpha) / scheme.tp
    optimizer = (math.ceil(layers / layout.pp) * memory.layer_state_bytes
                 + _embedding_matrices(layout.pp) * memory.embedding_state_bytes) * alpha / optimizer_shards
    return MemoryBreakdown(
        compute_states=compute,
        optimizer_states=optimizer,
        overhead=float(profile.overhead_bytes),
        safety_margin=float(memory.safety_margin_bytes),
        activation_per_token=profile.activation_bytes_per_token,
        device_memory=float(memory.device_memory_bytes),
    )


@dataclass(frozen=True)
class SchemeCapacity:
    """A scheme's profile with its memory under one optimizer layout."""

    profile: SchemeProfile
    memory: MemoryBreakdown

    @property
    def max_seq_len(self) -> int:
        return self.memory.max_seq_len


def scheme_capacities(space: SchemeSpace, layout: OptimizerLayout) -> tuple[SchemeCapacity, ...]:
    """Every scheme of ``space`` with its memory under ``layout`` (checked against the model
    and the cluster's device count first)."""
    layout.check(space.model, space.cluster.devices)
    return tuple(
        SchemeCapacity(profile, memory_breakdown(space.memory, space.model.layers, profile, layout))
        for profile in space.profiles
    )


def _embedding_matrices(pp: int) -> int:
    return 2 if pp == 1 else 1

"""Strategies and the proposal: pipelines grouped by scheme, and the few strategies the planner hands
to training (design §2, §7). Re-exported by :mod:`hydraulis.base.types`.
"""

from __future__ import annotations

from dataclasses import dataclass

from hydraulis.base.errors import require, require_int, require_number
from hydraulis.base.scheme import Scheme
from hydraulis.base.scheme_profile import TimeCoefficients
from hydraulis.base.space import PipelineModel
from hydraulis.base.specs import ModelSpec, OptimizerLayout


@dataclass(frozen=True)
class PipelineGroup:
    """``count`` identical pipelines running ``scheme``; each holds micro-batches (hence
    sequences) of at most ``max_seq_len`` tokens under the proposal's optimizer layout."""

    scheme: Scheme
    count: int
    max_seq_len: int
    time: TimeCoefficients

    def __post_init__(self) -> None:
        require_int(self.count, "pipelines.count", minimum=1)
        require_int(self.max_seq_len, "pipelines.max_seq_len", minimum=1)

    @property
    def devices(self) -> int:
        return self.count * self.scheme.devices


@dataclass(frozen=True)
class Strategy:
    """A multiset of pipelines, written ``1×(1,16,1) + 6×(1,8,1)``."""

    pipelines: tuple[PipelineGroup, ...]

    def __post_init__(self) -> None:
        require(len(self.pipelines) > 0, "strategy.pipelines", [], "must not be empty")

    @property
    def devices(self) -> int:
        return sum(group.devices for group in self.pipelines)

    @property
    def max_seq_len(self) -> int:
        return max(group.max_seq_len for group in self.pipelines)

    def expanded(self) -> tuple[PipelineGroup, ...]:
        """One entry per pipeline (group order, then replica order): the runtime's order."""
        return tuple(group for group in self.pipelines for _ in range(group.count))

    def __str__(self) -> str:
        return " + ".join(f"{g.count}×{g.scheme}" for g in self.pipelines)


@dataclass(frozen=True)
class ProposedStrategy:
    """A strategy of a proposal with what the planner predicts for it.

    It is meant for steps whose longest sequence lies in ``(serves_from, serves_to]``;
    ``predicted_ms`` is the mean step time over those steps, ``reduce_ms`` the gradient
    reduction part of it, ``headroom_bytes`` the free memory per group (beyond the safety
    margin) with the largest micro-batch the planner expects on it.
    """

    strategy: Strategy
    serves_from: int
    serves_to: int
    predicted_ms: float
    reduce_ms: float
    headroom_bytes: tuple[int, ...]
    explanation: str = ""

    def __post_init__(self) -> None:
        require(0 <= self.serves_from < self.serves_to, "serves_from", self.serves_from,
                f"must lie in [0, serves_to = {self.serves_to})")
        require_number(self.predicted_ms, "predicted_ms", minimum=0.0)
        require_number(self.reduce_ms, "reduce_ms", minimum=0.0)
        require(len(self.headroom_bytes) == len(self.strategy.pipelines), "headroom_bytes",
                len(self.headroom_bytes), f"must have one entry per pipeline group "
                f"({len(self.strategy.pipelines)})")


@dataclass(frozen=True)
class SolverReport:
    """What an optimisation really did: ``status`` is the solution's status (e.g. optimal,
    time_limit, heuristic), ``solver`` which method produced the returned answer."""

    status: str
    solver: str
    wall_ms: float
    message: str = ""


LOSS_CHUNK_TOKENS = 1024
"""Tokens per chunk of the runtime's loss over the vocabulary by default (``loss_chunk_tokens``;
0: the whole micro-batch at once); what a proposal's memory is priced with unless told otherwise."""


@dataclass(frozen=True)
class Proposal:
    """The planner's output: a few strategies sharing one optimizer layout; ``explanation``
    says why that layout and how the proposal compares with the best homogeneous strategy.
    ``reduce_gbps``, ``reduce_overlap``, ``grad_reduce_bytes`` and ``communicator_ms`` are the scheme space's:
    they price the reduction and the new communicators of a strategy made for one step.
    ``loss_chunk_tokens`` is the runtime's loss chunk the pipelines' ``max_seq_len`` were priced
    with (design §6.4): a job whose loss holds more at once may not fit them."""

    model: ModelSpec
    devices: int
    devices_per_node: int
    optimizer_layout: OptimizerLayout
    strategies: tuple[ProposedStrategy, ...]
    token_budget: int
    max_seq_len: int
    pipeline_model: PipelineModel
    solver: SolverReport
    explanation: str = ""
    reduce_gbps: float = 0.0
    communicator_ms: float = 0.0
    reduce_overlap: float = 0.0
    grad_reduce_bytes: int = 2
    loss_chunk_tokens: int = LOSS_CHUNK_TOKENS

    def __post_init__(self) -> None:
        require_int(self.devices, "devices", minimum=1)
        require_int(self.devices_per_node, "devices_per_node", minimum=1)
        require_int(self.token_budget, "token_budget", minimum=1)
        require_int(self.max_seq_len, "max_seq_len", minimum=1)
        require(len(self.strategies) > 0, "strategies", [], "must not be empty")
        require_number(self.reduce_gbps, "reduce_gbps", minimum=0.0)
        require_number(self.communicator_ms, "communicator_ms", minimum=0.0)
        require_number(self.reduce_overlap, "reduce_overlap", 0.0, 1.0)
        require(self.grad_reduce_bytes in (2, 4), "grad_reduce_bytes", self.grad_reduce_bytes, "must be 2 or 4")
        require_int(self.loss_chunk_tokens, "loss_chunk_tokens", minimum=0)

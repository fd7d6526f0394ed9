"""A fused-schedule problem: two (or more) models training on the same devices at once.

Every model has ``stages`` S and ``replicas`` R with ``R·S = N`` devices; replica ``r`` occupies
devices ``[r·S, (r + 1)·S)`` and its stage ``s`` sits on device ``r·S + s`` (``forward``
placement) or ``r·S + S − 1 − s`` (``reverse``), so a reverse model flows against a forward one
(Chimera, Li & Hoefler 2021; RLHFuse, Zhong et al. 2025). Replica ``r`` runs ``m_r``
micro-batches; micro-batch ``j`` takes ``f_{r,j}`` ms forward and ``b_{r,j}`` ms backward on
every stage (default ``b = 2·f``) and holds ``μ_{r,j}`` memory on a device from its forward
there until its backward there ends.

Every micro-batch is a chain of ``2S`` tasks ``F_0 … F_{S−1}, B_{S−1} … B_0``; every device holds
exactly one stage of one replica of each model. A *schedule* is an order of the tasks of each
device; objective: makespan, then peak memory, then the sum of per-device peaks.

Worked example: ``N = 4``, model 0 with S = 4 forward, model 1 with S = 2, R = 2, reverse:
device 0 holds model 0's stage 0 and model 1's replica-0 stage 1; device 3 holds model 0's
stage 3 and model 1's replica-1 stage 0.

Per-micro-batch values are given as one number, a list of ``m`` numbers (every replica the
same) or a list of ``R`` lists (one per replica, with ``micro_batches`` then a list of ``R``
counts) — the last form carries variable-length micro-batches from step plans.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from hydraulis.base.errors import HydraulisError, require, require_int, require_number

MAX_TASKS = 2_000_000
"""Largest number of tasks (``Σ_models 2·S·Σ_r m_r``) a problem may have."""

PerMicroBatch = tuple[tuple[float, ...], ...]
"""A value per replica and micro-batch: ``value[r][j]``."""


class Placement(str, Enum):
    """Where a model's stages sit on its replica's devices."""

    FORWARD = "forward"
    """Stage ``s`` of replica ``r`` on device ``r·S + s``."""
    REVERSE = "reverse"
    """Stage ``s`` of replica ``r`` on device ``r·S + S − 1 − s``."""


@dataclass(frozen=True)
class FusedModel:
    """One model of a fused problem; per-micro-batch values are normalised to ``[r][j]``."""

    name: str
    stages: int
    replicas: int
    placement: Placement
    forward_ms: PerMicroBatch
    backward_ms: PerMicroBatch
    memory_per_micro_batch: PerMicroBatch

    def __post_init__(self) -> None:
        require(isinstance(self.name, str) and bool(self.name), "name", self.name, "must be a non-empty string")
        require_int(self.stages, "stages", minimum=1)
        require_int(self.replicas, "replicas", minimum=1)
        require(isinstance(self.placement, Placement), "placement", self.placement,
                f"must be one of {', '.join(p.value for p in Placement)}")
        require(len(self.forward_ms) == self.replicas, "forward_ms", len(self.forward_ms),
                f"must hold one list per replica ({self.replicas})")
        for name in ("backward_ms", "memory_per_micro_batch"):
            values = getattr(self, name)
            require(tuple(len(v) for v in values) == self.micro_batches, name, [len(v) for v in values],
                    f"must hold one value per micro-batch ({list(self.micro_batches)})")
        for name, positive in (("forward_ms", True), ("backward_ms", True), ("memory_per_micro_batch", False)):
            for row in getattr(self, name):
                require(len(row) > 0, "micro_batches", 0, "must be >= 1")
                for value in row:
                    require_number(value, name)
                    require(value > 0 if positive else value >= 0, name, value,
                            "must be > 0" if positive else "must be >= 0")

    @property
    def micro_batches(self) -> tuple[int, ...]:
        """Micro-batches per replica."""
        return tuple(len(row) for row in self.forward_ms)

    def device(self, replica: int, stage: int) -> int:
        """The device of ``stage`` of ``replica`` under this model's placement."""
        local = stage if self.placement is Placement.FORWARD else self.stages - 1 - stage
        return replica * self.stages + local

    @property
    def tasks(self) -> int:
        return 2 * self.stages * sum(self.micro_batches)


@dataclass(frozen=True)
class FusedProblem:
    """``devices`` devices shared by ``models`` (each with ``stages·replicas = devices``)."""

    devices: int
    models: tuple[FusedModel, ...]

    def __post_init__(self) -> None:
        require_int(self.devices, "devices", minimum=1)
        require(len(self.models) > 0, "models", [], "must list at least one model")
        for i, model in enumerate(self.models):
            require(model.stages * model.replicas == self.devices, f"models[{i}].replicas", model.replicas,
                    f"times stages = {model.stages} must equal devices = {self.devices}")
        require(self.tasks <= MAX_TASKS, "models", f"{self.tasks} tasks", f"exceed the limit of {MAX_TASKS}")

    @property
    def tasks(self) -> int:
        return sum(model.tasks for model in self.models)

    @property
    def max_memory_per_micro_batch(self) -> float:
        """The least memory limit any schedule can meet (one micro-batch at a time)."""
        return max(max(max(row) for row in m.memory_per_micro_batch) for m in self.models)


def fused_model(name: str, stages: int, replicas: int, placement: Placement | str, micro_batches: Any,
                forward_ms: Any, backward_ms: Any = None, memory_per_micro_batch: Any = 1.0) -> FusedModel:
    """A :class:`FusedModel` from the JSON forms: ``micro_batches`` an int or one int per replica;
    each per-micro-batch value a number, a list of ``m`` numbers or a list of ``R`` lists;
    ``backward_ms`` defaults to twice the forward."""
    require_int(replicas, "replicas", minimum=1)
    if isinstance(placement, str) and not isinstance(placement, Placement):
        try:
            placement = Placement(placement)
        except ValueError:
            raise HydraulisError("placement", placement,
                                 f"must be one of {', '.join(p.value for p in Placement)}") from None
    counts = _counts(micro_batches, replicas)
    forward = per_micro_batch(forward_ms, "forward_ms", counts)
    backward = (tuple(tuple(2.0 * f for f in row) for row in forward) if backward_ms is None
                else per_micro_batch(backward_ms, "backward_ms", counts))
    memory = per_micro_batch(memory_per_micro_batch, "memory_per_micro_batch", counts)
    return FusedModel(name, stages, replicas, placement, forward, backward, memory)


def per_micro_batch(value: Any, field: str, counts: Sequence[int]) -> PerMicroBatch:
    """Normalise a number, a list of ``m`` numbers or a list of per-replica lists to ``[r][j]``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return tuple((float(value),) * m for m in counts)
    require(isinstance(value, (list, tuple)), field, value, "must be a number or a list")
    if value and all(isinstance(v, (list, tuple)) for v in value):
        require(len(value) == len(counts), field, f"{len(value)} lists",
                f"must hold one list per replica ({len(counts)})")
        rows = tuple(_numbers(row, f"{field}[{r}]", m) for r, (row, m) in enumerate(zip(value, counts)))
        return rows
    require(len(set(counts)) == 1, field, f"one list of {len(value)}",
            f"must be one list per replica when replicas run different micro-batch counts ({list(counts)})")
    row = _numbers(value, field, counts[0])
    return tuple(row for _ in counts)


def _numbers(row: Any, field: str, expected: int) -> tuple[float, ...]:
    require(isinstance(row, (list, tuple)), field, row, "must be a list of numbers")
    require(len(row) == expected, field, f"{len(row)} values", f"must hold one value per micro-batch ({expected})")
    return tuple(require_number(v, f"{field}[{j}]") for j, v in enumerate(row))


def _counts(micro_batches: Any, replicas: int) -> tuple[int, ...]:
    if isinstance(micro_batches, (list, tuple)):
        require(len(micro_batches) == replicas, "micro_batches", list(micro_batches),
                f"must hold one count per replica ({replicas})")
        return tuple(require_int(m, f"micro_batches[{r}]", minimum=1) for r, m in enumerate(micro_batches))
    return (require_int(micro_batches, "micro_batches", minimum=1),) * replicas

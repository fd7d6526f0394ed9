"""What ``hydraulis memory`` reports (no torch): the question (:class:`MemoryConfig`), every rank's
bytes by role beside the cost model's prediction (:class:`RankMemory`), per device group of a
mixed cluster (:class:`GroupMemory`), and the whole report (:class:`MemoryReport`). The runtime
computes it from its own modules on the ``meta`` device (:mod:`hydraulis.runtime.memory.report`);
:mod:`hydraulis.artifacts.memory_report` reads and writes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from hydraulis.base.cluster import ClusterDescription
from hydraulis.base.errors import require, require_int
from hydraulis.base.presets import device_preset
from hydraulis.base.types import LOSS_CHUNK_TOKENS, ModelSpec, OptimizerLayout
from hydraulis.cost.memory import DeviceMemory


@dataclass(frozen=True)
class MemoryConfig:
    """What to account: ``model`` under the strategy SPEC ``strategy`` on ``devices`` devices of
    the preset kind ``device`` (``devices_per_node`` per node), the optimizer layout (None:
    ``devices,1,1``), micro-batches of ``tokens`` tokens (None: each scheme's longest sequence),
    the loss in chunks of ``loss_chunk`` tokens (0: all at once; the runtime's default), K and V
    repeated to the query heads when ``repeat_kv`` (an attention kernel without grouped-query
    attention)."""

    model: ModelSpec
    strategy: str
    devices: int
    device: str = "h100-80g"
    devices_per_node: int = 8
    optimizer_layout: OptimizerLayout | None = None
    tokens: int | None = None

    cluster: ClusterDescription | None = None
    loss_chunk: int = LOSS_CHUNK_TOKENS
    repeat_kv: bool = False

    def __post_init__(self) -> None:
        require_int(self.devices, "devices", minimum=1)
        require_int(self.loss_chunk, "loss_chunk", minimum=0)
        require_int(self.devices_per_node, "devices_per_node", minimum=1)
        if self.tokens is not None:
            require_int(self.tokens, "tokens", minimum=1)
        device_preset(self.device)
        if self.cluster is not None:
            require(self.devices == self.cluster.devices, "devices", self.devices,
                    f"differs from the cluster's {self.cluster.devices} devices")
            for group in self.cluster.groups:
                device_preset(group.device)

    @property
    def layout(self) -> OptimizerLayout:
        return self.optimizer_layout or OptimizerLayout(self.devices, 1, 1)


@dataclass(frozen=True)
class RankMemory:
    """One rank's bytes (module docstring); ``pipeline`` and ``stage`` None when the strategy
    leaves it idle; ``predicted`` the cost model's. ``workspace_bytes``: the libraries'
    workspaces and one parameter's gradient in the compute dtype; ``exchange_bytes``: the
    exchanges' buffers in flight, which take turns with the activations
    (:mod:`hydraulis.sharding.step_memory`); ``communicator_bytes``: the communicators' buffers,
    outside the allocator and not in ``total_bytes``."""

    rank: int
    pipeline: int | None
    stage: int | None
    weights_bytes: int
    grad_bytes: int
    optimizer_bytes: int
    route_bytes: int
    activation_bytes: int
    predicted: DeviceMemory
    workspace_bytes: int = 0
    exchange_bytes: int = 0
    communicator_bytes: int = 0

    @property
    def states_bytes(self) -> int:
        return self.weights_bytes + self.grad_bytes + self.optimizer_bytes

    @property
    def total_bytes(self) -> int:
        return (self.states_bytes + self.route_bytes + self.workspace_bytes
                + max(self.activation_bytes, self.exchange_bytes))


@dataclass(frozen=True)
class GroupMemory:
    """The ranks judged on the device of one device group of the cluster, their largest total
    and prediction, each with the rank's communicators' buffers (ranks differ in them), and what
    the device leaves to those, states and activations."""

    name: str
    device: str
    ranks: tuple[int, ...]
    capacity_bytes: int
    max_total_bytes: int
    max_predicted_bytes: int

    @property
    def fits(self) -> bool:
        return self.max_total_bytes <= self.capacity_bytes


@dataclass(frozen=True)
class MemoryReport:
    """Every rank's memory, the micro-batch tokens per pipeline, and the ranks of each class
    (step 2 of the module docstring) in order of their first rank; with a cluster, per group."""

    config: MemoryConfig
    ranks: tuple[RankMemory, ...]
    tokens: tuple[int, ...]
    classes: tuple[tuple[int, ...], ...]
    groups: tuple[GroupMemory, ...] = ()

    @property
    def max_total_bytes(self) -> int:
        return max(rank.total_bytes for rank in self.ranks)

    @property
    def max_predicted_bytes(self) -> int:
        return round(max(rank.predicted.total for rank in self.ranks))

    @property
    def device_memory_bytes(self) -> int:
        return device_preset(self.config.device).memory_bytes

    @property
    def capacity_bytes(self) -> int:
        """What a device of ``config.device`` leaves to states and activations: its memory less the
        runtime's fixed overhead, the most connected rank's communicators and the safety margin
        (no total counts them)."""
        return capacity_bytes(self.config.device) - max(rank.communicator_bytes for rank in self.ranks)


def capacity_bytes(device: str) -> int:
    """What a device of preset ``device`` leaves to states and activations (module docstring)."""
    spec = device_preset(device)
    return spec.memory_bytes - spec.runtime_overhead_bytes - spec.safety_margin_bytes

"""What a plan is for: the model, the device kind, the cluster, and the optimizer layout (design §2).

:class:`ModelSpec` is the decoder's shape, :class:`DeviceSpec` one accelerator kind's figures,
:class:`Cluster` how many devices of which kind, :class:`OptimizerLayout` the one homogeneous
layout of the optimizer state. Re-exported by :mod:`hydraulis.types`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hydraulis.errors import HydraulisError, require, require_int, require_number
from hydraulis.limits import DEVICES, DEVICES_PER_NODE, PARALLEL_DEGREE
from hydraulis.scheme import Scheme


@dataclass(frozen=True)
class ModelSpec:
    """A Llama-style decoder: RMSNorm, rotary positions, SwiGLU MLP, grouped-query attention.
    ``rope_theta`` is the rotary base θ, ``norm_eps`` the RMSNorm ε (Llama 2: 10000 and 1e-5)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn_hidden: int
    vocab: int
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        require(bool(self.name), "model.name", self.name, "must not be empty")
        for name in ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab"):
            require_int(getattr(self, name), f"model.{name}", minimum=1)
        require(require_number(self.rope_theta, "model.rope_theta") > 1, "model.rope_theta", self.rope_theta,
                "must be > 1")
        require(require_number(self.norm_eps, "model.norm_eps") > 0, "model.norm_eps", self.norm_eps, "must be > 0")
        require(self.hidden % self.heads == 0, "model.hidden", self.hidden,
                f"must be a multiple of model.heads = {self.heads}")
        require(self.heads % self.kv_heads == 0, "model.kv_heads", self.kv_heads,
                f"must divide model.heads = {self.heads}")

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def matches(self, other: ModelSpec) -> bool:
        """The same model: the same name, or the same shape under another name (e.g. a
        Hugging Face import of a preset's model)."""
        return self.name == other.name or replace(other, name=self.name) == self

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def params_per_layer(self) -> int:
        """Attention ``H·(H + 2·kv_dim) + H²``, SwiGLU ``3·H·F``, two RMSNorm weights ``2·H``."""
        h = self.hidden
        return h * (h + 2 * self.kv_dim) + h * h + 3 * h * self.ffn_hidden + 2 * h

    @property
    def embedding_params(self) -> int:
        """One of the two ``V × H`` matrices (token embedding, untied output head)."""
        return self.vocab * self.hidden

    @property
    def params(self) -> int:
        return self.layers * self.params_per_layer + 2 * self.embedding_params + self.hidden

    def check_scheme(self, scheme: Scheme, field_name: str = "scheme") -> None:
        """Raise unless ``scheme`` can shard this model: tp | heads, tp | kv_heads or
        kv_heads | tp (kv heads are then replicated), tp | ffn_hidden, tp | vocab, pp ≤ layers,
        and no stage recomputes more layers than it holds. A staged scheme checks every stage's
        tp, and its stages' layers must sum to the model's."""
        if scheme.stages:
            for stage, s in enumerate(scheme.stages):
                self._check_tp(s.tp, f"{field_name}.stages[{stage}].tp")
            total = sum(s.layers for s in scheme.stages)
            require(total == self.layers, f"{field_name}.stages", str(scheme),
                    f"hold {total} layers in all, not model.layers = {self.layers}")
        else:
            self._check_tp(scheme.tp, f"{field_name}.tp")
        require(scheme.pp <= self.layers, f"{field_name}.pp", scheme.pp,
                f"exceeds model.layers = {self.layers}")
        for stage, layers in enumerate(scheme.stage_layers(self.layers)):
            try:
                scheme.full_layers(stage, layers)
            except HydraulisError as error:
                raise HydraulisError(f"{field_name}.recompute_layers", error.value,
                                     f"{error.problem} (model.layers = {self.layers} in {scheme.pp} stages)") from None

    def shards(self, scheme: Scheme) -> bool:
        """Whether :meth:`check_scheme` accepts ``scheme``."""
        try:
            self.check_scheme(scheme)
        except HydraulisError:
            return False
        return True

    def _check_tp(self, tp: int, field_name: str) -> None:
        require(self.heads % tp == 0, field_name, tp, f"does not divide model.heads = {self.heads}")
        require(self.kv_heads % tp == 0 or tp % self.kv_heads == 0, field_name, tp,
                f"neither divides nor is a multiple of model.kv_heads = {self.kv_heads}")
        require(self.ffn_hidden % tp == 0, field_name, tp, f"does not divide model.ffn_hidden = {self.ffn_hidden}")
        require(self.vocab % tp == 0, field_name, tp, f"does not divide model.vocab = {self.vocab}")


WORKSPACE_THREADS = 2
"""Threads of a training step that run matrix products, each with its own cuBLAS handle and
workspace: the one running the forward and the autograd engine's device thread (backward)."""


@dataclass(frozen=True)
class DeviceSpec:
    """One accelerator kind and its node: vendor figures plus the assumptions that turn peak
    rates into achievable ones (``*_efficiency``); ``reduce_overlap`` the share of a gradient
    exchange that overlaps compute (design §6.3); ``library_workspace_bytes`` the cuBLAS workspace
    PyTorch's caching allocator holds per thread that runs matrix products (a step has
    :data:`WORKSPACE_THREADS`). Values live in ``resources/presets.json``."""

    name: str
    memory_bytes: int
    peak_tflops: float
    matmul_efficiency: float
    attention_efficiency: float
    intra_node_gbps: float
    inter_node_gbps: float
    devices_per_node: int
    layer_overhead_us: float
    collective_latency_us: float
    runtime_overhead_bytes: int
    safety_margin_bytes: int
    communicator_ms: float = 0.0
    reduce_overlap: float = 0.0
    library_workspace_bytes: int = 0

    def __post_init__(self) -> None:
        require(bool(self.name), "device.name", self.name, "must not be empty")
        require_int(self.library_workspace_bytes, "device.library_workspace_bytes", minimum=0)
        require_int(self.memory_bytes, "device.memory_bytes", minimum=1)
        require_int(self.devices_per_node, "device.devices_per_node", minimum=1)
        require_int(self.runtime_overhead_bytes, "device.runtime_overhead_bytes", minimum=0)
        require_int(self.safety_margin_bytes, "device.safety_margin_bytes", minimum=0)
        for name in ("peak_tflops", "intra_node_gbps", "inter_node_gbps"):
            require(require_number(getattr(self, name), f"device.{name}") > 0,
                    f"device.{name}", getattr(self, name), "must be > 0")
        for name in ("matmul_efficiency", "attention_efficiency"):
            value = require_number(getattr(self, name), f"device.{name}", maximum=1.0)
            require(value > 0, f"device.{name}", value, "must be > 0")
        for name in ("layer_overhead_us", "collective_latency_us", "communicator_ms"):
            require_number(getattr(self, name), f"device.{name}", minimum=0.0)
        require_number(self.reduce_overlap, "device.reduce_overlap", 0.0, 1.0)

    @property
    def workspace_bytes(self) -> int:
        """The library workspaces a training step leaves allocated: one per thread that runs
        matrix products, the forward's and the autograd engine's (backward)."""
        return WORKSPACE_THREADS * self.library_workspace_bytes


@dataclass(frozen=True)
class Cluster:
    """How many devices, how many per node, and which device kind (a preset name)."""

    devices: int
    devices_per_node: int
    device: str

    def __post_init__(self) -> None:
        DEVICES.check(self.devices, "cluster.devices")
        DEVICES_PER_NODE.check(self.devices_per_node, "cluster.devices_per_node")
        require(bool(self.device), "cluster.device", self.device, "must not be empty")


@dataclass(frozen=True)
class OptimizerLayout:
    """The homogeneous layout of fp32 master weights and Adam moments (ZeRO-1 over ``dp``)."""

    dp: int
    tp: int
    pp: int

    def __post_init__(self) -> None:
        for name in ("dp", "tp", "pp"):
            PARALLEL_DEGREE.check(getattr(self, name), f"optimizer_layout.{name}")

    @property
    def devices(self) -> int:
        return self.dp * self.tp * self.pp

    def check(self, model: ModelSpec, devices: int) -> None:
        """Raise unless the layout shards ``model`` and its size divides ``devices``."""
        model.check_scheme(Scheme(1, self.tp, self.pp), "optimizer_layout")
        require(devices % self.devices == 0, "optimizer_layout", f"{self.dp},{self.tp},{self.pp}",
                f"uses {self.devices} devices, which does not divide the {devices} devices")

    def __str__(self) -> str:
        return f"dp{self.dp}·tp{self.tp}·pp{self.pp}"

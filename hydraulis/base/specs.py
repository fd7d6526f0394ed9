"""What a plan is for: the model, the device kind, the cluster, and the optimizer layout (design §2).

:class:`ModelSpec` is the decoder's shape, :class:`DeviceSpec` one accelerator kind's figures,
:class:`Cluster` how many devices of which kind, :class:`OptimizerLayout` the one homogeneous
layout of the optimizer state. Re-exported by :mod:`hydraulis.base.types`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hydraulis.base.errors import HydraulisError, require, require_int, require_number
from hydraulis.base.limits import DEVICES, DEVICES_PER_NODE, PARALLEL_DEGREE
from hydraulis.base.scheme import Scheme


@dataclass(frozen=True)
class ModelSpec:
    """A Llama-style decoder: RMSNorm, rotary positions, SwiGLU MLP, grouped-query attention.
    ``rope_theta`` is the rotary base θ, ``norm_eps`` the RMSNorm ε (Llama 2: 10000 and 1e-5).

    ``head_dim`` (0: ``hidden/heads``) and ``qk_norm`` (an RMSNorm over each query and key head
    before the rotation) shape Qwen3's attention. ``experts > 0`` makes every MLP a mixture of
    experts (the runtime's ``runtime/model/moe.py``): ``experts`` routed SwiGLU experts of width ``ffn_hidden``, each
    token sent to ``top_k`` of them, plus ``shared_experts`` experts' width that every token runs
    (DeepSeekMoE); ``normalise_top_k`` rescales the top-k router probabilities to sum to 1
    (Mixtral, Qwen3-30B-A3B; not DeepSeekMoE); ``aux_loss_coef`` weighs the load-balancing loss;
    ``routing_imbalance`` ``ρ ≥ 1`` is the most loaded expert-parallel rank's tokens over the mean
    (a planning assumption until profiled)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn_hidden: int
    vocab: int
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    head_dim_override: int = 0
    qk_norm: bool = False
    experts: int = 0
    top_k: int = 0
    shared_experts: int = 0
    normalise_top_k: bool = True
    aux_loss_coef: float = 0.0
    routing_imbalance: float = 1.0

    def __post_init__(self) -> None:
        require(bool(self.name), "model.name", self.name, "must not be empty")
        for name in ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab"):
            require_int(getattr(self, name), f"model.{name}", minimum=1)
        require(require_number(self.rope_theta, "model.rope_theta") > 1, "model.rope_theta", self.rope_theta,
                "must be > 1")
        require(require_number(self.norm_eps, "model.norm_eps") > 0, "model.norm_eps", self.norm_eps, "must be > 0")
        require_int(self.head_dim_override, "model.head_dim_override", minimum=0)
        require(self.head_dim_override > 0 or self.hidden % self.heads == 0, "model.hidden", self.hidden,
                f"must be a multiple of model.heads = {self.heads} (or give model.head_dim_override)")
        require(self.head_dim % 2 == 0, "model.head_dim", self.head_dim, "must be even (rotary halves)")
        require(isinstance(self.qk_norm, bool), "model.qk_norm", self.qk_norm, "must be true or false")
        require(isinstance(self.normalise_top_k, bool), "model.normalise_top_k", self.normalise_top_k,
                "must be true or false")
        for name in ("experts", "top_k", "shared_experts"):
            require_int(getattr(self, name), f"model.{name}", minimum=0)
        require(self.top_k <= self.experts, "model.top_k", self.top_k, f"exceeds model.experts = {self.experts}")
        require(self.experts == 0 or self.top_k >= 1, "model.top_k", self.top_k,
                "must be ≥ 1 for a mixture of experts")
        require(self.experts > 0 or self.top_k == self.shared_experts == 0, "model.experts", self.experts,
                "must be > 0 when model.top_k or model.shared_experts is set")
        require_number(self.aux_loss_coef, "model.aux_loss_coef", minimum=0.0)
        require_number(self.routing_imbalance, "model.routing_imbalance", minimum=1.0)
        require(self.heads % self.kv_heads == 0, "model.kv_heads", self.kv_heads,
                f"must divide model.heads = {self.heads}")

    @property
    def head_dim(self) -> int:
        return self.head_dim_override or self.hidden // self.heads

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def attention_params(self) -> int:
        """``W_q, W_o``: ``2·H·h_q·d``; ``W_k, W_v``: ``2·H·kv``; two RMSNorm weights ``2·H``; the
        q/k norms ``2·d`` under ``qk_norm``."""
        h, q = self.hidden, self.heads * self.head_dim
        return 2 * h * q + 2 * h * self.kv_dim + 2 * h + (2 * self.head_dim if self.qk_norm else 0)

    @property
    def expert_params(self) -> int:
        """One SwiGLU expert of width ``F``: ``3·H·F``."""
        return 3 * self.hidden * self.ffn_hidden

    @property
    def routed_params_per_layer(self) -> int:
        """The routed experts of one layer, ``E·3·H·F`` (what expert parallelism splits); 0 when dense."""
        return self.experts * self.expert_params

    @property
    def dense_params_per_layer(self) -> int:
        """What every rank of a stage's tensor-parallel group shards: attention, norms, the MLP of
        a dense model; of a mixture, the router ``E·H`` and the shared experts ``n_s·3·H·F``."""
        if not self.is_moe:
            return self.attention_params + self.expert_params
        return self.attention_params + self.experts * self.hidden + self.shared_experts * self.expert_params

    @property
    def active_params_per_layer(self) -> int:
        """The parameters one token's forward multiplies by: all of a dense layer's; of a mixture's,
        attention, router, shared experts and ``top_k`` routed experts."""
        return self.dense_params_per_layer + self.top_k * self.expert_params

    def matches(self, other: ModelSpec) -> bool:
        """The same model: the same name, or the same shape under another name (e.g. a
        Hugging Face import of a preset's model)."""
        return self.name == other.name or replace(other, name=self.name) == self

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def params_per_layer(self) -> int:
        """Attention ``H·(H + 2·kv_dim) + H²``, SwiGLU ``3·H·F``, two RMSNorm weights ``2·H``; of a
        mixture of experts, :attr:`dense_params_per_layer` plus :attr:`routed_params_per_layer`."""
        return self.dense_params_per_layer + self.routed_params_per_layer

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
        require(scheme.ep == 1 or self.is_moe and self.experts % scheme.ep == 0, f"{field_name}.ep", scheme.ep,
                f"must divide model.experts = {self.experts}" if self.is_moe else "needs a mixture of experts")
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
        mlp = self.shared_experts * self.ffn_hidden if self.is_moe else self.ffn_hidden
        require(mlp % tp == 0, field_name, tp, f"does not divide the tensor-parallel MLP's width {mlp}")
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
    :data:`WORKSPACE_THREADS`); ``communicator_buffer_bytes`` per channel of ``communicator_channels``
    the collective library's buffers per peer. Values live in ``resources/presets.json``."""

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
    communicator_buffer_bytes: int = 0
    communicator_channels: int = 0

    def __post_init__(self) -> None:
        require(bool(self.name), "device.name", self.name, "must not be empty")
        require_int(self.library_workspace_bytes, "device.library_workspace_bytes", minimum=0)
        require_int(self.communicator_buffer_bytes, "device.communicator_buffer_bytes", minimum=0)
        require_int(self.communicator_channels, "device.communicator_channels", minimum=0)
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

    @property
    def communicator_peer_bytes(self) -> int:
        """What a collective library holds outside the allocator per peer of a rank's
        communicators: one buffer per channel (:func:`~hydraulis.sharding.step_memory.communicator_bytes`)."""
        return self.communicator_buffer_bytes * self.communicator_channels


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

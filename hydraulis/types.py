"""Core types of Hydraulis and the glossary they spell out.

Every part of the system speaks these words (design §2); each is one frozen dataclass below,
validated at construction so that a value that exists is a valid value.

=====================  =====================================================================
word                   meaning
=====================  =====================================================================
scheme                 one parallel layout of a single model replica, ``(cp, tp, pp)``; it
                       uses ``cp·tp·pp`` devices (:class:`Scheme`)
scheme profile         a scheme's fitted time coefficients ``a, b, c`` and memory terms
                       (:class:`SchemeProfile`)
scheme space           all scheme profiles plus model, cluster and memory facts, with
                       provenance (:class:`SchemeSpace`)
pipeline               one model replica running one scheme (a data-parallel member); a
                       strategy holds them in groups of identical pipelines
                       (:class:`PipelineGroup`)
strategy               a multiset of pipelines using at most the cluster's devices, e.g.
                       ``1×(1,16,1) + 6×(1,8,1)`` (:class:`Strategy`)
optimizer layout       the one homogeneous ``(dp, tp, pp)`` layout that holds fp32 master
                       weights and Adam moments, whatever strategy computes a step
                       (:class:`OptimizerLayout`)
proposal               the few strategies the planner hands to training, one chosen per step
                       (:class:`Proposal`)
micro-batch            packed sequences run together through one pipeline (:class:`MicroBatch`)
step plan              for one global batch: chosen strategy, sequences per pipeline, their
                       packing into micro-batches, predicted time (:class:`StepPlan`)
synthesis              a strategy made for one step from the proposal's (or the space's)
                       schemes when it beats every proposal strategy, switch included
                       (:class:`Synthesis`)
batching method        how a batch is cut into micro-batches (:class:`BatchingMethod`)
=====================  =====================================================================

Units: times in milliseconds, memory in bytes, lengths in tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import Enum

from typing import TYPE_CHECKING

from hydraulis.errors import HydraulisError, require, require_int, require_number
from hydraulis.limits import DEVICES, DEVICES_PER_NODE, PARALLEL_DEGREE
from hydraulis.stages import Stage, stages_text

if TYPE_CHECKING:
    from hydraulis.segments import Segments


class BatchingMethod(str, Enum):
    """How one global batch becomes micro-batches (design §2, the paper's baselines)."""

    PADDING = "padding"
    """Pad every sequence to the batch's longest; a fixed number of sequences per micro-batch."""
    FIXED_PACKING = "fixed_packing"
    """Pack to a fixed token capacity, deal micro-batches round-robin (Megatron-LM style)."""
    DISPATCH_FIXED_PACKING = "dispatch_fixed_packing"
    """Stage-1 dispatch of sequences to pipelines, then fixed-capacity packing."""
    DISPATCH_BALANCED_PACKING = "dispatch_balanced_packing"
    """Stage-1 dispatch, then time-balanced packing (Hydraulis)."""


class Synthesise(str, Enum):
    """Which schemes a strategy made for one step may use."""

    OFF = "off"
    """None: the step runs the best proposal strategy."""
    PROPOSAL = "proposal"
    """Counts of the proposal's schemes."""
    SPACE = "space"
    """Counts of the scheme space's schemes and the proposal's."""


SYNTHESIS_EVALUATIONS_DEFAULT = 16
"""Strategies dispatch plans per step while synthesising, unless told otherwise."""


class SpaceSource(str, Enum):
    """Where a scheme space's numbers came from."""

    MEASURED = "measured"
    ANALYTIC = "analytic"
    IMPORTED = "imported"


class Recompute(str, Enum):
    """Which activations a pipeline recomputes in backward instead of keeping from forward."""

    NONE = "none"
    """Keep every activation autograd needs."""
    SELECTIVE = "selective"
    """Recompute the attention core (Korthikanti et al. 2022): keep its inputs, not its internals."""
    FULL = "full"
    """Keep only each layer's input; recompute the whole layer in backward."""


@dataclass(frozen=True)
class SchemeOptions:
    """The options of a scheme apart from its degrees, written as in a SPEC's brackets:
    ``sp`` and ``recompute=none|selective|full``, comma-separated (e.g. ``sp,recompute=full``;
    empty: the defaults). Full recomputation of only some layers is ``recompute=full:K`` (the
    first ``K`` layers of every stage) or ``recompute=full:K1/K2/…`` (one count per stage), see
    :class:`Scheme`. :meth:`parse` reads that text, :meth:`scheme` applies the options to degrees."""

    sp: bool = False
    recompute: Recompute = Recompute.NONE
    recompute_layers: tuple[int, ...] = ()

    @classmethod
    def parse(cls, text: str, field: str = "options") -> SchemeOptions:
        """The options of ``text``; an unknown, repeated or ill-valued option names ``field``."""
        values: dict[str, object] = {}
        for item in (part.strip() for part in text.split(",")):
            if not item:
                continue
            name, _, value = item.partition("=")
            mode, _, layers = value.partition(":")
            if name == "sp" and not value:
                require("sp" not in values, field, item, "is given twice")
                values["sp"] = True
                continue
            if name != "recompute" or mode not in {r.value for r in Recompute} or not _layer_counts(layers, mode):
                raise HydraulisError(field, item, "is not an option: sp, or recompute=" +
                                     "|".join(r.value for r in Recompute) + " (full:K or full:K1/K2/… for K layers "
                                                                           "of each stage)")
            require("recompute" not in values, field, item, "is given twice")
            values["recompute"] = Recompute(mode)
            values["recompute_layers"] = tuple(int(k) for k in layers.split("/")) if layers else ()
        return cls(**values)

    @property
    def items(self) -> tuple[str, ...]:
        """The non-default options in SPEC order, e.g. ``("sp", "recompute=full:2")``."""
        layers = ":" + "/".join(str(k) for k in self.recompute_layers) if self.recompute_layers else ""
        return (("sp",) if self.sp else ()) + (
            (f"recompute={self.recompute.value}{layers}",) if self.recompute is not Recompute.NONE else ())

    def scheme(self, cp: int, tp: int, pp: int) -> Scheme:
        return Scheme(cp, tp, pp, self.sp, self.recompute, self.recompute_layers)

    def __str__(self) -> str:
        return ",".join(self.items)


def _layer_counts(text: str, mode: str) -> bool:
    """Whether ``text`` (after ``recompute=MODE:``) is empty or, for ``full``, counts ``K1/K2/…``."""
    return not text or (mode == Recompute.FULL.value and all(k.isdigit() for k in text.split("/")))


@dataclass(frozen=True, order=True)
class Scheme:
    """One parallel layout of a model replica: context, tensor and pipeline parallel degrees,
    plus its options — Megatron-style sequence parallelism ``sp`` (needs ``tp > 1``) and
    activation recomputation. Two schemes with the same degrees and other options are two
    schemes: they differ in time and in the longest sequence they hold.

    ``recompute_layers`` refines ``recompute = full``: empty, every layer is recomputed; else
    ``(K,)`` recomputes the first ``K`` decoder layers of every stage and ``(K_0, …, K_{pp−1})``
    the first ``K_σ`` of stage ``σ`` in full, the other layers keeping their activations
    (Megatron-LM's "block" recomputation, ``--recompute-num-layers``, with a count per stage:
    1F1B keeps ``pp − σ`` micro-batches in flight on stage ``σ``, so the first stages need the
    most). Counts equal on every stage are written once: ``(2, 2)`` is ``(2,)``. E.g.
    ``Scheme(1, 1, 2, recompute=FULL, recompute_layers=(2, 1))`` on a 4-layer model recomputes
    layers 0 and 1 (all of stage 0) and 2 (the first of stage 1's 2 and 3).

    ``stages`` makes a *staged* scheme (:mod:`hydraulis.stages`, design §18): one
    :class:`~hydraulis.stages.Stage` per pipeline stage, each with its own tp, layer count and
    device group; ``pp`` is then their number and ``tp`` the widest stage's (build one with
    :meth:`staged`). E.g. ``Scheme.staged(1, (Stage(4, 20), Stage(2, 12)))`` is ``(1|4:20>2:12)``:
    6 devices, 32 layers. Empty ``stages``: every stage has ``tp`` devices and the layers are
    split evenly."""

    cp: int
    tp: int
    pp: int
    sp: bool = False
    recompute: Recompute = Recompute.NONE
    recompute_layers: tuple[int, ...] = ()
    stages: tuple[Stage, ...] = ()

    @classmethod
    def staged(cls, cp: int, stages: tuple[Stage, ...], recompute: Recompute = Recompute.NONE,
               recompute_layers: tuple[int, ...] = ()) -> Scheme:
        """The staged scheme of ``cp`` and ``stages`` (``tp`` the widest, ``pp`` their number)."""
        require(len(stages) > 0, "scheme.stages", [], "must name at least one stage")
        return cls(cp, max(s.tp for s in stages), len(stages), False, recompute, recompute_layers, tuple(stages))

    def __post_init__(self) -> None:
        for name in ("cp", "tp", "pp"):
            PARALLEL_DEGREE.check(getattr(self, name), f"scheme.{name}")
        require(isinstance(self.sp, bool), "scheme.sp", self.sp, "must be true or false")
        require(not self.sp or self.tp > 1, "scheme.sp", self.sp,
                f"needs scheme.tp > 1 (sequence parallelism shards over the tp group), tp = {self.tp}")
        require(isinstance(self.recompute, Recompute), "scheme.recompute", self.recompute,
                f"must be one of {', '.join(r.value for r in Recompute)}")
        layers = self.recompute_layers
        require(isinstance(layers, tuple), "scheme.recompute_layers", layers, "must be a tuple of layer counts")
        for count in layers:
            require_int(count, "scheme.recompute_layers", minimum=0)
        require(not layers or self.recompute is Recompute.FULL, "scheme.recompute_layers", list(layers),
                f"needs recompute = full (it counts the layers recomputed in full), not {self.recompute.value}")
        require(len(layers) in (0, 1, self.pp), "scheme.recompute_layers", list(layers),
                f"must give one count for every stage or one per stage (pp = {self.pp})")
        require(not layers or any(layers), "scheme.recompute_layers", list(layers),
                "recomputes no layer: leave recomputation out")
        if len(set(layers)) == 1 and len(layers) > 1:
            object.__setattr__(self, "recompute_layers", layers[:1])
        self._check_stages()

    def _check_stages(self) -> None:
        stages = self.stages
        require(isinstance(stages, tuple) and all(isinstance(s, Stage) for s in stages), "scheme.stages",
                stages, "must be a tuple of stages")
        if not stages:
            return
        text = stages_text(self.cp, stages)
        require(len(stages) == self.pp, "scheme.stages", text, f"must name one stage per pipeline stage (pp = {self.pp})")
        require(self.tp == max(s.tp for s in stages), "scheme.tp", self.tp,
                f"must be the widest stage's tp ({max(s.tp for s in stages)}) in a staged scheme {text}")
        require(not self.sp, "scheme.sp", self.sp, f"is not supported with per-stage tp ({text})")
        for stage, s in enumerate(stages):
            self.full_layers(stage, s.layers)

    @property
    def is_staged(self) -> bool:
        """Whether the stages differ in tp, layers or device group (``stages`` given)."""
        return bool(self.stages)

    def stage_tp(self, stage: int) -> int:
        """The tensor-parallel degree of ``stage``."""
        return self.stages[stage].tp if self.stages else self.tp

    def stage_layers(self, layers: int) -> tuple[int, ...]:
        """The decoder layers of each stage for a model of ``layers`` layers: the stages' own
        counts, or the even split (the first ``layers mod pp`` stages one more)."""
        if self.stages:
            return tuple(s.layers for s in self.stages)
        base, extra = divmod(layers, self.pp)
        return tuple(base + (stage < extra) for stage in range(self.pp))

    @property
    def devices(self) -> int:
        if self.stages:
            return self.cp * sum(s.tp for s in self.stages)
        return self.cp * self.tp * self.pp

    @property
    def variant(self) -> SchemeOptions:
        """The options apart from the degrees."""
        return SchemeOptions(self.sp, self.recompute, self.recompute_layers)

    def full_layers(self, stage: int, layers: int) -> int:
        """How many of the ``layers`` decoder layers of ``stage`` are recomputed in full."""
        if self.recompute is not Recompute.FULL:
            return 0
        if not self.recompute_layers:
            return layers
        count = self.recompute_layers[0 if len(self.recompute_layers) == 1 else stage]
        require(count <= layers, "scheme.recompute_layers", list(self.recompute_layers),
                f"recomputes {count} layers of stage {stage}, which holds {layers}")
        return count

    def stage_recompute(self, stage: int, layers: int) -> tuple[Recompute, ...]:
        """What each of the ``layers`` decoder layers of ``stage`` recomputes, in order."""
        if self.recompute is not Recompute.FULL:
            return (self.recompute,) * layers
        full = self.full_layers(stage, layers)
        return (Recompute.FULL,) * full + (Recompute.NONE,) * (layers - full)

    @property
    def options(self) -> tuple[str, ...]:
        """The non-default options in SPEC order, e.g. ``("sp", "recompute=full")``."""
        return self.variant.items

    def __str__(self) -> str:
        options = f"[{','.join(self.options)}]" if self.options else ""
        if self.stages:
            return f"({stages_text(self.cp, self.stages)}){options}"
        return f"({self.cp},{self.tp},{self.pp}){options}"


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

    def _check_tp(self, tp: int, field_name: str) -> None:
        require(self.heads % tp == 0, field_name, tp, f"does not divide model.heads = {self.heads}")
        require(self.kv_heads % tp == 0 or tp % self.kv_heads == 0, field_name, tp,
                f"neither divides nor is a multiple of model.kv_heads = {self.kv_heads}")
        require(self.ffn_hidden % tp == 0, field_name, tp, f"does not divide model.ffn_hidden = {self.ffn_hidden}")
        require(self.vocab % tp == 0, field_name, tp, f"does not divide model.vocab = {self.vocab}")


@dataclass(frozen=True)
class DeviceSpec:
    """One accelerator kind and its node: vendor figures plus the assumptions that turn peak
    rates into achievable ones (``*_efficiency``). Values live in ``resources/presets.json``."""

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

    def __post_init__(self) -> None:
        require(bool(self.name), "device.name", self.name, "must not be empty")
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


@dataclass(frozen=True)
class TimeCoefficients:
    """Time of one micro-batch on one pipeline stage, forward + backward, in ms (design §4):
    ``t(mb) = c + Σ_i (a·s_i² + b·s_i)``."""

    a: float
    b: float
    c: float

    def __post_init__(self) -> None:
        for name in ("a", "b", "c"):
            require_number(getattr(self, name), name, minimum=0.0)


@dataclass(frozen=True)
class FitQuality:
    """How well fitted coefficients predict measurements held out of the fit."""

    r2: float
    median_rel_error: float
    max_rel_error: float
    points: int


@dataclass(frozen=True)
class SchemeProfile:
    """What the planner knows about one scheme.

    ``activation_bytes_per_token`` is the activation memory per token of a micro-batch on the
    most loaded device (under 1F1B the first stage keeps ``pp`` micro-batches of ``L/pp``
    layers, so it is the whole model's per-token activation divided by ``tp·cp``);
    ``overhead_bytes`` the fixed runtime overhead per device (context, communicator buffers);
    ``utilization_tokens`` the smallest micro-batch that keeps a device busy (0: unknown).
    """

    scheme: Scheme
    time: TimeCoefficients
    activation_bytes_per_token: float
    overhead_bytes: int
    utilization_tokens: int = 0
    fit: FitQuality | None = None

    def __post_init__(self) -> None:
        value = require_number(self.activation_bytes_per_token, "activation_bytes_per_token")
        require(value > 0, "activation_bytes_per_token", value, "must be > 0")
        require_int(self.overhead_bytes, "overhead_bytes", minimum=0)
        require_int(self.utilization_tokens, "utilization_tokens", minimum=0)


@dataclass(frozen=True)
class MemoryModel:
    """Model-state memory facts shared by all schemes of a space (design §4).

    ``layer_state_bytes`` is one layer's unsharded model-state bytes (≈ 16 bytes/param:
    bf16 params + grads, fp32 master + two Adam moments), ``embedding_state_bytes`` the same for
    one ``V × H`` matrix. A share ``sharded_state_fraction`` (α ≈ 12/16) follows the optimizer
    layout, the rest follows the compute layout.
    """

    device_memory_bytes: int
    safety_margin_bytes: int
    layer_state_bytes: float
    embedding_state_bytes: float
    sharded_state_fraction: float

    def __post_init__(self) -> None:
        require_int(self.device_memory_bytes, "memory.device_memory_bytes", minimum=1)
        require_int(self.safety_margin_bytes, "memory.safety_margin_bytes", minimum=0)
        require_number(self.layer_state_bytes, "memory.layer_state_bytes", minimum=0.0)
        require_number(self.embedding_state_bytes, "memory.embedding_state_bytes", minimum=0.0)
        require_number(self.sharded_state_fraction, "memory.sharded_state_fraction", 0.0, 1.0)


@dataclass(frozen=True)
class PipelineModel:
    """How a pipeline's micro-batches are timed: 1F1B with a forward share of each micro-batch's
    time (default 1/3, i.e. forward:backward = 1:2) and a point-to-point latency per hand-off."""

    forward_fraction: float = 1.0 / 3.0
    p2p_ms: float = 0.0

    def __post_init__(self) -> None:
        value = require_number(self.forward_fraction, "pipeline_model.forward_fraction", maximum=1.0)
        require(value > 0, "pipeline_model.forward_fraction", value, "must be > 0")
        require_number(self.p2p_ms, "pipeline_model.p2p_ms", minimum=0.0)


@dataclass(frozen=True)
class Provenance:
    """Where a scheme space came from: source, device, date (ISO 8601), tool version, command;
    ``software`` the measuring stack of a measured space (e.g. ``torch 2.13.0, gloo, fp32``)."""

    source: SpaceSource
    device: str
    created: str
    tool_version: str
    command: str = ""
    software: str = ""


@dataclass(frozen=True)
class SchemeSpace:
    """Every profiled scheme of one model on one cluster.

    ``reduce_gbps`` is the bandwidth (GB/s per device) of the gradient reduction into the
    optimizer layout; 0 leaves the reduction out of step times. A space with ``segments``
    (:mod:`hydraulis.segments`: the decoder layer and the blocks around it per ``(cp, tp, sp)``)
    also holds every *variant* of its schemes — sequence parallelism, recomputation of any
    number of layers per stage — composed on demand by :meth:`profile`; its ``profiles`` are
    the plain schemes (the compositions without options). ``communicator_ms`` is the time to
    create one communicator, which a step pays for every communicator its strategy is the first
    to need (:mod:`hydraulis.placement`).
    """

    model: ModelSpec
    cluster: Cluster
    memory: MemoryModel
    profiles: tuple[SchemeProfile, ...]
    provenance: Provenance
    pipeline_model: PipelineModel = field(default_factory=PipelineModel)
    reduce_gbps: float = 0.0
    segments: tuple[Segments, ...] = ()
    communicator_ms: float = 0.0

    def __post_init__(self) -> None:
        require(len(self.profiles) > 0, "schemes", [], "must list at least one scheme")
        seen: set[Scheme] = set()
        for i, profile in enumerate(self.profiles):
            require(profile.scheme not in seen, f"schemes[{i}]", str(profile.scheme), "is listed twice")
            seen.add(profile.scheme)
            self.model.check_scheme(profile.scheme, f"schemes[{i}]")
        require_number(self.reduce_gbps, "reduce_gbps", minimum=0.0)
        require_number(self.communicator_ms, "communicator_ms", minimum=0.0)
        keys = [s.key for s in self.segments]
        for i, key in enumerate(keys):
            require(key not in keys[:i], f"segments[{i}]", list(key), "is listed twice")
        for i, profile in enumerate(self.profiles):
            scheme = profile.scheme
            require(not self.segments or (scheme.cp, scheme.tp, scheme.sp) in keys, f"schemes[{i}]", str(scheme),
                    "has no segments (cp, tp, sp) to compose its variants from")

    @property
    def has_variants(self) -> bool:
        """Whether the space composes variants of its schemes from segments."""
        return bool(self.segments)

    def segments_of(self, cp: int, tp: int, sp: bool) -> Segments | None:
        return next((s for s in self.segments if s.key == (cp, tp, sp)), None)

    def profile(self, scheme: Scheme) -> SchemeProfile:
        """The listed profile of ``scheme``, or in a space with segments its composition
        (with the overhead of the plain scheme of its degrees)."""
        for profile in self.profiles:
            if profile.scheme == scheme:
                return profile
        segments = self.segments_of(scheme.cp, scheme.tp, scheme.sp)
        plain = next((p for p in self.profiles if p.scheme == Scheme(scheme.cp, scheme.tp, scheme.pp)), None)
        if segments is None or plain is None:
            raise HydraulisError("scheme", str(scheme), "is not in the scheme space")
        from hydraulis.segments import compose_profile

        self.model.check_scheme(scheme)
        return compose_profile(segments, self.model, scheme, self.cluster.devices_per_node, plain.overhead_bytes)


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


@dataclass(frozen=True)
class Proposal:
    """The planner's output: a few strategies sharing one optimizer layout; ``explanation``
    says why that layout and how the proposal compares with the best homogeneous strategy.
    ``reduce_gbps`` and ``communicator_ms`` are the scheme space's: they price the reduction
    and the new communicators of a strategy made for one step."""

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

    def __post_init__(self) -> None:
        require_int(self.devices, "devices", minimum=1)
        require_int(self.devices_per_node, "devices_per_node", minimum=1)
        require_int(self.token_budget, "token_budget", minimum=1)
        require_int(self.max_seq_len, "max_seq_len", minimum=1)
        require(len(self.strategies) > 0, "strategies", [], "must not be empty")
        require_number(self.reduce_gbps, "reduce_gbps", minimum=0.0)
        require_number(self.communicator_ms, "communicator_ms", minimum=0.0)


@dataclass(frozen=True)
class MicroBatch:
    """Sequences packed together: ``sequences`` index the batch's lengths, ``lengths`` copies
    them so a micro-batch is self-describing."""

    sequences: tuple[int, ...]
    lengths: tuple[int, ...]

    def __post_init__(self) -> None:
        require(len(self.sequences) == len(self.lengths), "micro_batch.lengths", len(self.lengths),
                f"must have one entry per sequence ({len(self.sequences)})")

    @property
    def tokens(self) -> int:
        return sum(self.lengths)

    def cu_seqlens(self, alignment: int = 1) -> tuple[int, ...]:
        """Cumulative sequence starts ``(0, s₁', s₁'+s₂', …)`` with each length rounded up to a
        multiple of ``alignment`` (e.g. alignment 8 turns lengths (5, 9) into (0, 8, 24))."""
        require_int(alignment, "alignment", minimum=1)
        bounds = [0]
        for length in self.lengths:
            bounds.append(bounds[-1] + math.ceil(length / alignment) * alignment)
        return tuple(bounds)


@dataclass(frozen=True)
class PipelinePlan:
    """One pipeline's share of a step: its micro-batches in execution order, how its packing was
    obtained (``solver_status``) and, when proven, a lower bound on its time for its number of
    micro-batches (``proven_ms``: its own time when the packing is proven optimal)."""

    scheme: Scheme
    max_seq_len: int
    micro_batches: tuple[MicroBatch, ...]
    predicted_ms: float
    solver_status: str = ""
    proven_ms: float | None = None


@dataclass(frozen=True)
class Synthesis:
    """A strategy made for one step because it beat every proposal strategy on it, switch
    included: ``reduce_ms`` its reduction, ``switch_ms`` the time to create its
    ``new_communicators`` (those no earlier step had), ``proposal_ms`` the best proposal
    strategy's predicted step time, ``evaluations`` how many strategies the dispatcher planned
    to find it, ``start`` where the winning descent began."""

    strategy: Strategy
    reduce_ms: float
    switch_ms: float
    new_communicators: int
    proposal_ms: float
    evaluations: int
    start: str

    def __post_init__(self) -> None:
        require_number(self.reduce_ms, "synthesis.reduce_ms", minimum=0.0)
        require_number(self.switch_ms, "synthesis.switch_ms", minimum=0.0)
        require_int(self.new_communicators, "synthesis.new_communicators", minimum=0)
        require_int(self.evaluations, "synthesis.evaluations", minimum=0)


@dataclass(frozen=True)
class StepPlan:
    """One global batch planned: strategy ``strategy_index`` of the proposal — or, when
    ``synthesis`` is set (``strategy_index`` −1), the strategy made for this step — and one
    :class:`PipelinePlan` per pipeline in :meth:`Strategy.expanded` order. ``predicted_ms``
    includes a synthesised strategy's switch."""

    strategy_index: int
    method: BatchingMethod
    predicted_ms: float
    lower_bound_ms: float
    planning_ms: float
    pipelines: tuple[PipelinePlan, ...]
    alignment: int = 1
    seed: int = 0
    notes: tuple[str, ...] = ()
    synthesis: Synthesis | None = None

    def strategy(self, proposal: Proposal) -> Strategy:
        """The strategy this plan runs: the synthesised one, or the proposal's."""
        return self.synthesis.strategy if self.synthesis else proposal.strategies[self.strategy_index].strategy

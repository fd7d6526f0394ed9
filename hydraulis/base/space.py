"""A scheme space: every profiled scheme of one model on one cluster, with provenance (design §2, §6).

:class:`~hydraulis.base.scheme_profile.SchemeProfile` (one scheme's fitted time coefficients and
memory terms) per scheme, :class:`MemoryModel` and :class:`PipelineModel` the facts all schemes share, :class:`Provenance`
where the numbers came from (:class:`SpaceSource`), :class:`SchemeSpace` all of it.
Re-exported by :mod:`hydraulis.base.types`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from hydraulis.base.errors import HydraulisError, require, require_int, require_number
from hydraulis.base.scheme import Scheme
from hydraulis.base.scheme_profile import SchemeProfile
from hydraulis.base.segments import Segments, compose_profile
from hydraulis.base.specs import Cluster, ModelSpec


class SpaceSource(str, Enum):
    """Where a scheme space's numbers came from."""

    MEASURED = "measured"
    ANALYTIC = "analytic"
    IMPORTED = "imported"


@dataclass(frozen=True)
class MemoryModel:
    """Model-state memory facts shared by all schemes of a space (design §6).

    ``layer_state_bytes`` is one layer's unsharded model-state bytes (22 bytes/param under
    bf16: bf16 params, fp32 gradients, fp32 master, reduced gradient and two Adam moments),
    ``embedding_state_bytes`` the same for one ``V × H`` matrix. A share ``sharded_state_fraction`` (α = 16/22) follows the optimizer
    layout, the rest follows the compute layout. ``communicator_peer_bytes`` is what the
    collective library holds outside the allocator per peer of a rank's communicators
    (:func:`~hydraulis.sharding.step_memory.communicator_bytes`; 0: none counted).
    """

    device_memory_bytes: int
    safety_margin_bytes: int
    layer_state_bytes: float
    embedding_state_bytes: float
    sharded_state_fraction: float
    communicator_peer_bytes: int = 0

    def __post_init__(self) -> None:
        require_int(self.device_memory_bytes, "memory.device_memory_bytes", minimum=1)
        require_int(self.safety_margin_bytes, "memory.safety_margin_bytes", minimum=0)
        require_number(self.layer_state_bytes, "memory.layer_state_bytes", minimum=0.0)
        require_number(self.embedding_state_bytes, "memory.embedding_state_bytes", minimum=0.0)
        require_number(self.sharded_state_fraction, "memory.sharded_state_fraction", 0.0, 1.0)
        require_int(self.communicator_peer_bytes, "memory.communicator_peer_bytes", minimum=0)


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
    (:mod:`hydraulis.base.segments`: the decoder layer and the blocks around it per ``(cp, tp, sp)``)
    also holds every *variant* of its schemes — sequence parallelism, recomputation of any
    number of layers per stage — composed on demand by :meth:`profile`; its ``profiles`` are
    the plain schemes (the compositions without options). ``communicator_ms`` is the time to
    create one communicator, which a step pays for every communicator its strategy is the first
    to need (:mod:`hydraulis.base.placement`). ``reduce_overlap`` ``ω`` is the share of the reduction
    that overlaps compute on the device (design §6.3; 0: none, the reduction fully exposed);
    ``grad_reduce_bytes`` the bytes per gradient the reduction sends (2: bf16, 4: fp32).
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
    reduce_overlap: float = 0.0
    grad_reduce_bytes: int = 2

    def __post_init__(self) -> None:
        require(len(self.profiles) > 0, "schemes", [], "must list at least one scheme")
        seen: set[Scheme] = set()
        for i, profile in enumerate(self.profiles):
            require(profile.scheme not in seen, f"schemes[{i}]", str(profile.scheme), "is listed twice")
            seen.add(profile.scheme)
            self.model.check_scheme(profile.scheme, f"schemes[{i}]")
        require_number(self.reduce_gbps, "reduce_gbps", minimum=0.0)
        require_number(self.communicator_ms, "communicator_ms", minimum=0.0)
        require_number(self.reduce_overlap, "reduce_overlap", 0.0, 1.0)
        require(self.grad_reduce_bytes in (2, 4), "grad_reduce_bytes", self.grad_reduce_bytes, "must be 2 or 4")
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

        self.model.check_scheme(scheme)
        return compose_profile(segments, self.model, scheme, self.cluster.devices_per_node, plain.overhead_bytes)

"""Memory per device of a scheme under an optimizer layout, and the longest sequence it holds.

A device running stage ``σ`` of ``L_σ`` layers that owns a buffer of optimizer stage ``σ_o``
(design §6.4; every symbol in :class:`MemoryBreakdown`)::

    states = (L_σ·B_layer·ρ + n_σ·B_emb/tp)·(1 − α) + (L_σo·B_layer + n_σo·B_emb)·α/(tp_o·dp_o)
    free   = M − safety − overhead − N − states − g_max
    S_max  = max {T : A(T) ≤ free}  (0 when the exchanges' buffers X exceed free)

``N`` the communicators' buffers outside the allocator (:mod:`hydraulis.sharding.step_memory`),
``A(T) = m_tok·T`` but for the runtime's loss in chunks (:func:`activation_curve`).
Worked example, reference LLaMA-7B pool (``B = 210·H²``, α = 0.75, H = 4096, L = 32, V = 30592,
``A_tp1 = 38``), scheme (1,1,2), layout dp8·tp4·pp1:
states ≈ 14.09 + 2.64 + 0.50 + 0.09 = 17.33 GB; free = 85.20 − 6.44 − 5.24 − 17.33 = 56.18 GB;
``m_tok = 32·4096·38 ≈ 4.98 MB`` → ``S_max ≈ 11,279``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache

from hydraulis.base.stages import even_split
from hydraulis.base.types import (
    LOSS_CHUNK_TOKENS,
    MemoryModel,
    ModelSpec,
    OptimizerLayout,
    Recompute,
    Scheme,
    SchemeProfile,
    SchemeSpace,
)
from hydraulis.sharding.activations import (
    ActivationCurve,
    stage_activation_curve,
    stage_bytes_per_token,
)
from hydraulis.sharding.pipeline import PipelineSplit
from hydraulis.sharding.states import MAIN_GRADIENT_BYTES, largest_held_elements, layer_elements
from hydraulis.sharding.step_memory import (
    analytic_exchange_bytes,
    communicator_bytes,
    communicator_peers,
    held_gradient_bytes,
    one_owner,
)


class MemoryLimit(str, Enum):
    """What bounds a scheme's longest sequence."""

    ACTIVATIONS = "activation memory"
    MODEL_STATES = "model states exceed device memory"
    EXCHANGE = "the exchanges' buffers exceed the memory the states leave"


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes per device of one scheme under one optimizer layout.

    For compute scheme ``(cp, tp, pp)`` and optimizer layout ``(dp_o, tp_o, pp_o)`` (design §6.4;
    the original system's formula, README of the original pools, with the runtime's own shares),
    a device running stage ``σ`` of ``L_σ`` layers that owns a buffer of optimizer stage ``σ_o``::

        states = (L_σ·B_layer·ρ + n_σ·B_emb/tp)·(1 − α) + (L_σo·B_layer + n_σo·B_emb)·α/(tp_o·dp_o)
        ρ      = P_l(tp)/P_l                  the share of a layer a tp rank holds
        n_σ    = [σ first] + [σ last]          (the embedding, the output head)
        free   = M − safety − overhead − N − states − g_max
        S_max  = max {T : A(T) ≤ free}  (0 when the exchanges' buffers X exceed free)

    ``B_layer``/``B_emb`` are one layer's / one ``V×H`` matrix's unsharded model-state bytes, α the
    share that follows the optimizer layout (:mod:`hydraulis.sharding.states`: master weights, reduced
    gradients and Adam moments, 16 of the 22 bytes per parameter under bf16), ``P_l(tp)`` the
    elements of a layer each tp rank holds (``1/tp`` of it, plus the norm weights and, when ``tp``
    exceeds the kv heads, a kv head it shares). The planner judges a scheme by its most loaded
    device (:func:`memory_breakdown`): ``L_σ = ⌈L/pp⌉``, ``n_σ = 2`` if ``pp = 1`` else 1, the same
    for the owner, and ``m_tok`` the scheme's activation bytes per token on that device (the first
    1F1B stage keeps up to ``pp`` micro-batches of ``L/pp`` layers); ``overhead`` holds the
    libraries' workspaces, ``g_max``, ``X`` and ``N`` (the communicators' buffers, the most
    connected stage's; states of this runtime only) are those of :mod:`hydraulis.sharding.step_memory`
    (the activations and ``X`` take turns). ``S_max`` bounds both the longest sequence and a
    micro-batch's tokens. ``A(T)``, the activations of a micro-batch of ``T`` tokens, is
    ``m_tok·T`` with the whole loss; with the runtime's loss in chunks (its default), the largest
    of the stages' :func:`activation_curve` (``activation_curves``; states of this runtime only).
    :func:`device_memory` predicts any one device: its own stage and buffer,
    and ``m_tok`` scaled by the runtime's accounting of its stage
    (:mod:`hydraulis.sharding.activations`) against the most loaded one of the even split.
    """

    compute_states: float
    optimizer_states: float
    overhead: float
    safety_margin: float
    activation_per_token: float
    device_memory: float
    gradient: float = 0.0
    exchange: float = 0.0
    activation_curves: tuple[ActivationCurve, ...] = ()
    communicators: float = 0.0

    def activation_bytes(self, tokens: int) -> float:
        """``A(T)``: the activations of a micro-batch of ``tokens`` tokens."""
        if not self.activation_curves:
            return self.activation_per_token * tokens
        return max(curve.bytes(tokens) for curve in self.activation_curves)

    @property
    def states(self) -> float:
        return self.compute_states + self.optimizer_states

    @property
    def free_for_activations(self) -> float:
        return (self.device_memory - self.safety_margin - self.overhead - self.communicators - self.states
                - self.gradient)

    @property
    def max_seq_len(self) -> int:
        free = self.free_for_activations
        if self.exchange > free:
            return 0
        if not self.activation_curves:
            return max(0, math.floor(free / self.activation_per_token))
        return min(curve.longest(free) for curve in self.activation_curves)

    @property
    def limit(self) -> MemoryLimit:
        if self.max_seq_len > 0:
            return MemoryLimit.ACTIVATIONS
        return MemoryLimit.EXCHANGE if 0 < self.free_for_activations < self.exchange else MemoryLimit.MODEL_STATES

    def headroom_bytes(self, tokens: int) -> float:
        """Bytes left free beyond the safety margin with micro-batches of ``tokens`` tokens."""
        return self.free_for_activations - max(self.activation_bytes(tokens), self.exchange)


def memory_breakdown(
    memory: MemoryModel, model: ModelSpec, profile: SchemeProfile, layout: OptimizerLayout, devices: int = 0,
    loss_chunk: int = LOSS_CHUNK_TOKENS,
) -> MemoryBreakdown:
    """The terms of the module docstring's formula for ``profile``'s most loaded device under
    ``layout``, on a world of ``devices`` ranks (0: unknown, never one owner: :func:`_one_owner`),
    with the runtime's loss in chunks of ``loss_chunk`` tokens (0: whole)."""
    scheme = profile.scheme
    even = PipelineSplit(scheme, scheme.stage_layers(model.layers))
    local = _one_owner(memory, model, layout, even, devices)
    compute = _most_loaded_states(memory, model, scheme) * _held_share(memory, model, local)
    gradient, exchange = (max(terms) for terms in zip(*(step_terms(memory, model, even, stage, compute, local)
                                                       for stage in range(scheme.pp))))
    return MemoryBreakdown(
        compute_states=compute,
        optimizer_states=optimizer_states(memory, layout, math.ceil(model.layers / layout.pp),
                                          _embedding_matrices(layout.pp)),
        overhead=float(profile.overhead_bytes),
        safety_margin=float(memory.safety_margin_bytes),
        activation_per_token=profile.activation_bytes_per_token,
        device_memory=float(memory.device_memory_bytes),
        gradient=gradient,
        exchange=exchange,
        communicators=max(_communicators(memory, model, scheme, stage, devices) for stage in range(scheme.pp)),
        activation_curves=(tuple(activation_curve(model, profile, even, stage, _dtype_bytes(memory, model), loss_chunk)
                                 for stage in range(scheme.pp))
                           if loss_chunk and _runtime_states(memory, model) else ()),
    )


def compute_states(memory: MemoryModel, model: ModelSpec, scheme: Scheme, layers: int, matrices: int,
                   stage: int = 0) -> float:
    """``(L_σ·B_layer·ρ + n_σ·B_emb/tp_σ)·(1 − α)``: weights and gradients of a device of ``stage``
    of ``scheme`` holding ``layers`` layers and ``matrices`` embedding matrices."""
    share = layer_elements(model, scheme, stage) / model.params_per_layer
    return (layers * memory.layer_state_bytes * share
            + matrices * memory.embedding_state_bytes / scheme.stage_tp(stage)) * (1.0 - memory.sharded_state_fraction)


def _most_loaded_states(memory: MemoryModel, model: ModelSpec, scheme: Scheme) -> float:
    """:func:`compute_states` of :class:`MemoryBreakdown`'s most loaded device; of a staged scheme,
    the largest of its stages' (each with its own tp and layers)."""
    if not scheme.is_staged:
        return compute_states(memory, model, scheme, math.ceil(model.layers / scheme.pp), _embedding_matrices(scheme.pp))
    return max(compute_states(memory, model, scheme, s.layers, (stage == 0) + (stage == scheme.pp - 1), stage)
               for stage, s in enumerate(scheme.stages))


def optimizer_states(memory: MemoryModel, layout: OptimizerLayout, layers: int, matrices: int) -> float:
    """``(L_σo·B_layer + n_σo·B_emb)·α/(tp_o·dp_o)``: one owner's buffer of an optimizer stage."""
    return ((layers * memory.layer_state_bytes + matrices * memory.embedding_state_bytes)
            * memory.sharded_state_fraction / (layout.tp * layout.dp))


@dataclass(frozen=True)
class DeviceMemory:
    """Predicted bytes of one device: its states, its activations for one micro-batch size, the
    libraries' workspaces with one parameter's gradient, and the exchanges' buffers
    (:mod:`hydraulis.sharding.step_memory`: the activations and the exchanges take turns); beside
    them, outside the allocator and not in ``total``, the communicators' buffers."""

    compute_states: float
    optimizer_states: float
    activations: float
    workspace: float = 0.0
    exchange: float = 0.0
    communicators: float = 0.0

    @property
    def states(self) -> float:
        return self.compute_states + self.optimizer_states

    @property
    def total(self) -> float:
        return self.states + self.workspace + max(self.activations, self.exchange)


@dataclass(frozen=True)
class StagePlace:
    """The stage a device runs: ``stage`` of a pipeline of ``scheme`` whose stages hold
    ``stage_layers`` decoder layers."""

    scheme: Scheme
    stage_layers: tuple[int, ...]
    stage: int


def device_memory(space: SchemeSpace, layout: OptimizerLayout, owner_stage: int | None, running: StagePlace | None,
                  tokens: int, workspace: int = 0, loss_chunk: int = LOSS_CHUNK_TOKENS,
                  repeat_kv: bool = False) -> DeviceMemory:
    """The cost model's bytes for a device that owns a buffer of optimizer stage ``owner_stage``
    (None: none) and runs ``running`` (None: idle) with micro-batches of ``tokens`` tokens, the
    libraries' ``workspace`` bytes, the loss in chunks of ``loss_chunk`` tokens (0: none) and K/V
    repeated when ``repeat_kv`` (:class:`MemoryBreakdown`; safety margin and overhead excluded; the
    space's activations, of the whole loss and grouped-query attention, scaled by the runtime's
    accounting of the options)."""
    model = space.model
    optimizer = 0.0
    if owner_stage is not None:
        owned = even_split(model.layers, layout.pp)[owner_stage]
        optimizer = optimizer_states(space.memory, layout, owned, (owner_stage == 0) + (owner_stage == layout.pp - 1))
    if running is None:
        return DeviceMemory(0.0, optimizer, 0.0,
                            communicators=_communicators(space.memory, model, None, 0, space.cluster.devices))
    scheme, stage, pp = running.scheme, running.stage, running.scheme.pp
    pipeline = PipelineSplit(scheme, running.stage_layers)
    local = _one_owner(space.memory, model, layout, pipeline, space.cluster.devices)
    compute = compute_states(space.memory, model, scheme, running.stage_layers[stage], (stage == 0) + (stage == pp - 1),
                             stage) * _held_share(space.memory, model, local)
    curve = activation_curve(model, space.profile(scheme), pipeline, stage, _dtype_bytes(space.memory, model),
                             loss_chunk, repeat_kv)
    gradient, exchange = step_terms(space.memory, model, pipeline, stage, compute, local)
    return DeviceMemory(compute, optimizer, curve.bytes(tokens) if tokens else 0.0, workspace + gradient, exchange,
                        _communicators(space.memory, model, scheme, stage, space.cluster.devices))


@dataclass(frozen=True)
class SchemeCapacity:
    """A scheme's profile with its memory under one optimizer layout."""

    profile: SchemeProfile
    memory: MemoryBreakdown

    @property
    def max_seq_len(self) -> int:
        return self.memory.max_seq_len


def scheme_capacities(space: SchemeSpace, layout: OptimizerLayout,
                      loss_chunk: int = LOSS_CHUNK_TOKENS) -> tuple[SchemeCapacity, ...]:
    """Every scheme of ``space`` with its memory under ``layout`` (checked against the model
    and the cluster's device count first), the runtime's loss in chunks of ``loss_chunk`` tokens."""
    layout.check(space.model, space.cluster.devices)
    return tuple(
        SchemeCapacity(profile, memory_breakdown(space.memory, space.model, profile, layout, space.cluster.devices,
                                                 loss_chunk))
        for profile in space.profiles
    )


def _embedding_matrices(pp: int) -> int:
    return 2 if pp == 1 else 1


def activation_curve(model: ModelSpec, profile: SchemeProfile, pipeline: PipelineSplit, stage: int,
                     dtype_bytes: int, loss_chunk: int = 0, repeat_kv: bool = False) -> ActivationCurve:
    """``A(T)`` of a device of ``stage`` of ``pipeline`` under the runtime's options (the loss in
    chunks of ``loss_chunk`` tokens, K/V repeated when ``repeat_kv``): the runtime's accounting
    (:func:`~hydraulis.sharding.activations.stage_activation_curve`) times
    ``m_tok / max_σ m_σ``, the profile's bytes per token over those the accounting gives the most
    loaded stage of the even split (of a staged scheme, of its own stages) without the options —
    what a profile's ``m_tok`` describes, so a measured space carries its measurement to the
    options. Worked example: an analytic space's factor is 1, so Llama-7B ``1,1,1[recompute=full]``
    on an H200 at 4,096 tokens in chunks of 1,024 has ``A = 2,647 MB``, 3,605 MB with the whole loss."""
    scheme = profile.scheme
    layers = scheme.stage_recompute(stage, pipeline.stage_layers[stage])
    return measured_curve(model, scheme, layers, stage, dtype_bytes, profile.activation_bytes_per_token
                          / _whole_loss_bytes_per_token(model, scheme, dtype_bytes), loss_chunk, repeat_kv)


def measured_curve(model: ModelSpec, scheme: Scheme, layers: tuple[Recompute, ...], stage: int, dtype_bytes: int,
                   factor: float, loss_chunk: int, repeat_kv: bool = False) -> ActivationCurve:
    """The runtime's accounting of ``stage`` (its ``layers``' recomputation) under the options,
    times ``factor``, a space's bytes per token over the accounting's without them."""
    return _stage_curve(model, scheme, layers, stage, dtype_bytes, loss_chunk, repeat_kv).scaled(factor)


def stage_memory_terms(memory: MemoryModel, model: ModelSpec, scheme: Scheme, stage: int, layers: int,
                       per_token: float, devices: int,
                       loss_chunk: int = LOSS_CHUNK_TOKENS) -> tuple[tuple[ActivationCurve, ...], float]:
    """``A(T)`` (empty: ``per_token·T``) and ``N`` of :class:`MemoryBreakdown` for a device of
    ``stage`` of the plain ``scheme`` holding ``layers`` layers whose space keeps ``per_token``
    bytes per token with the whole loss, on ``devices`` devices (for states of this runtime)."""
    if not _runtime_states(memory, model):
        return (), 0.0
    b = _dtype_bytes(memory, model)
    recompute = scheme.stage_recompute(stage, layers)
    whole = stage_bytes_per_token(model, scheme, recompute, stage, b)
    curves = (measured_curve(model, scheme, recompute, stage, b, per_token / whole, loss_chunk),) if loss_chunk else ()
    return curves, _communicators(memory, model, scheme, stage, devices)


@lru_cache(maxsize=1024)
def _stage_curve(model: ModelSpec, scheme: Scheme, layers: tuple, stage: int, dtype_bytes: int, loss_chunk: int,
                 repeat_kv: bool) -> ActivationCurve:
    return stage_activation_curve(model, scheme, layers, stage, dtype_bytes, loss_chunk, repeat_kv)


@lru_cache(maxsize=1024)
def _whole_loss_bytes_per_token(model: ModelSpec, scheme: Scheme, dtype_bytes: int) -> float:
    """``max_σ m_σ`` of :func:`activation_curve`."""
    return max(stage_bytes_per_token(model, scheme, scheme.stage_recompute(stage, layers), stage, dtype_bytes)
               for stage, layers in enumerate(scheme.stage_layers(model.layers)))


def step_terms(memory: MemoryModel, model: ModelSpec, layout: PipelineSplit, stage: int, compute: float,
               local: bool = False) -> tuple[float, float]:
    """``(g_max, X)`` of :mod:`hydraulis.sharding.step_memory` for a device of ``stage`` of
    ``layout`` whose compute states are ``compute`` bytes (``X = 0`` when ``local``: one owner,
    :func:`~hydraulis.sharding.step_memory.one_owner`); ``(0, 0)`` for states that are not this
    runtime's (:func:`_runtime_states`)."""
    if not _runtime_states(memory, model):
        return 0.0, 0.0
    b = _dtype_bytes(memory, model)
    exchange = 0.0 if local else analytic_exchange_bytes(compute / (b + MAIN_GRADIENT_BYTES), b, _reduce_bytes(b))
    return float(b * largest_held_elements(model, layout, stage)), exchange


def _runtime_states(memory: MemoryModel, model: ModelSpec) -> bool:
    """Whether the compute share of the states is this runtime's, ``w + 4`` bytes per held
    parameter (an imported original pool describes the original system's runtime, which has
    neither ``g_max`` nor ``X`` nor one owner)."""
    per_parameter = memory.layer_state_bytes * (1.0 - memory.sharded_state_fraction) / model.params_per_layer
    return abs(per_parameter - (_dtype_bytes(memory, model) + MAIN_GRADIENT_BYTES)) <= 0.01


def _communicators(memory: MemoryModel, model: ModelSpec, scheme: Scheme | None, stage: int, devices: int) -> float:
    """``N`` of a device of ``stage`` of ``scheme`` (None: idle, the exchange's only) on
    ``devices`` devices (0: unknown, the scheme's), for states of this runtime."""
    if not _runtime_states(memory, model):
        return 0.0
    peers = communicator_peers(scheme, stage, max(devices, scheme.devices if scheme else 0))
    return float(communicator_bytes(peers, memory.communicator_peer_bytes))


def _one_owner(memory: MemoryModel, model: ModelSpec, layout: OptimizerLayout, pipeline: PipelineSplit,
               devices: int) -> bool:
    """:func:`~hydraulis.sharding.step_memory.one_owner` for states of this runtime."""
    return _runtime_states(memory, model) and one_owner(layout, pipeline, devices)


def _held_share(memory: MemoryModel, model: ModelSpec, local: bool) -> float:
    """``(w + g)/(w + 4)``: the part of the compute states a device holds, ``g`` of
    :func:`~hydraulis.sharding.step_memory.held_gradient_bytes` (bf16 one owner: 2/6, the main
    gradients are the optimizer's fp32 gradient, counted in its states)."""
    b = _dtype_bytes(memory, model)
    return (b + held_gradient_bytes(b, local)) / (b + MAIN_GRADIENT_BYTES)


def _reduce_bytes(dtype_bytes: int) -> int:
    """The gradients' bytes in the exchange by default: bf16 beside bf16 compute (CUDA), fp32 beside fp32."""
    return dtype_bytes


def _dtype_bytes(memory: MemoryModel, model: ModelSpec) -> int:
    """The compute dtype's bytes that the compute share of the states implies (weights in it and
    fp32 gradients, :mod:`hydraulis.sharding.states`: 8 bytes per parameter in fp32, 6 in bf16):
    2 or 4."""
    per_parameter = memory.layer_state_bytes * (1.0 - memory.sharded_state_fraction) / model.params_per_layer
    return 4 if per_parameter >= 8 else 2

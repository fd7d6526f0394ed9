"""An analytic scheme space: plan for hardware you do not have.

Every coefficient follows from the model shape and the device's figures (``presets.json``).
Notation: ``H`` hidden, ``F`` MLP hidden, ``V`` vocabulary, ``kv`` key/value width,
``P_l`` parameters per layer, ``R`` peak FLOP/s, ``η_m``/``η_a`` achievable fractions for
matmuls/attention, ``β_tp``, ``β_cp``, ``β_pp`` link bandwidths (NVLink inside a node, the
network when a group spans nodes), ``λ`` collective latency, ``o`` the fixed time per layer per
micro-batch. The space is composed from **segments** (:mod:`hydraulis.base.segments`): one decoder
layer per ``(cp, tp, sp, recompute)`` and the ends of a stage by its position, forward +
backward per micro-batch:

* a layer's dense work, 6 FLOPs per parameter per token (forward 2, backward 4)::

The details: :func:`analytic_scheme_space`."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import replace

from hydraulis.base.errors import require
from hydraulis.base.segments import Block, Segments, compose_profile
from hydraulis.base.types import (
    Cluster,
    DeviceSpec,
    MemoryModel,
    ModelSpec,
    PipelineModel,
    Provenance,
    Recompute,
    Scheme,
    SchemeOptions,
    SchemeProfile,
    SchemeSpace,
    SpaceSource,
    TimeCoefficients,
)
from hydraulis.profiler.analytic_moe import routed_layer_time
from hydraulis.sharding.activations import (
    Widths,
    layer_backward_bytes_per_token,
    layer_bytes_per_token,
    loss_bytes_per_token,
    micro_batch_bytes_per_token,
    norm_backward_bytes_per_token,
    released_bytes_per_token,
)
from hydraulis.sharding.kinds import OptimizerKind, ReduceDtype
from hydraulis.sharding.states import DTYPE_BYTES, device_precision, state_bytes


def analytic_scheme_space(
    model: ModelSpec,
    device: DeviceSpec,
    cluster: Cluster,
    cps: Iterable[int],
    tps: Iterable[int],
    pps: Iterable[int],
    created: str,
    tool_version: str,
    command: str = "",
    variants: Iterable[SchemeOptions] = (SchemeOptions(),),
    segments: bool = False,
) -> SchemeSpace:
    """Every ``(cp, tp, pp)`` from the given degrees that shards ``model`` and fits the cluster,
    under each of ``variants`` (an ``sp`` variant where ``tp > 1``); with ``segments``, the plain
    schemes and the segments of every ``(cp, tp, sp)`` they use, from which the space composes
    every variant (:class:`~hydraulis.base.space.SchemeSpace`). A mixture of experts gets its
    :func:`expert_degrees` (``ep > 1`` with sp), each scheme listed (segments do not carry
    ``ep``): with ``segments``, under :data:`EXPERT_VARIANTS`, with sp wherever ``tp > 1`` (sp
    changes no time term and keeps less; without it the tp ranks repeat the routed experts).

          b_flop = 6·P_l / (tp·cp·R·η_m)

    * its causal attention, ``2·H·s²`` FLOPs forward, ×3.5 with the backward's recompute
      (FlashAttention-2, Dao 2023)::

          a = 7·H / (tp·cp·R·η_a)

    * tensor parallelism with sequence parallelism: two all-gathers and two reduce-scatters of
      ``2H`` bytes per token forward, as many backward, each moving a share ``(tp−1)/tp``
      (Korthikanti et al. 2022)::

          b_tp = 16·H·(tp−1)/tp / (cp·β_tp)

    * context parallelism as a ring passing K and V (forward) and K, V, dK, dV (backward)::

          b_cp = 12·kv·(cp−1)/cp / (tp·β_cp)

    * a layer's fixed cost per micro-batch: ``c = o + λ·(8·[tp>1] + 3·(cp−1))``;

    * the ends: the output head on the last stage, ``b = 6·H·V / (tp·cp·R·η_m)``; a pipeline
      hand-off per neighbour of a stage, ``2H`` bytes per token each way sharded over tp and cp,
      ``b_pp = 4·H / (tp·cp·β_pp)`` and ``c = 2·λ`` (``β_pp`` the network's when the pipeline
      spans nodes); the embedding's lookup is free.

    A stage of ``L_s = ⌈L/pp⌉`` plain layers on the last stage thus has ``b = 6·(L_s·P_l + H·V)/(tp·cp·R·η_m)
    + L_s·(b_tp + b_cp) + [pp>1]·b_pp``, ``a = 7·H·L_s/(tp·cp·R·η_a)`` and
    ``c = L_s·(o + λ·(8·[tp>1] + 3·(cp−1))) + 2·λ·[pp>1]``; the scheme takes the slowest stage's
    coefficients (:func:`~hydraulis.base.segments.compose_profile`).

    Recomputation (:class:`~hydraulis.base.scheme.Recompute`) runs forward work again in the backward:
    a ``selective`` layer its attention core (``a``: 7 → 9); a ``full`` layer its whole forward —
    its 2 of the 6 dense FLOPs per parameter (``6·P_l → 8·P_l``), the attention (``a``: 7 → 9) and
    the forward half of its tp and cp traffic and collectives (×3/2 and ×4/3). Sequence
    parallelism changes no time term: its all-gathers and reduce-scatters are the ones assumed
    above. A scheme recomputing ``k_σ`` of its stage's layers in full (``recompute=full:K``) has
    ``k_σ`` full layers and ``L_σ − k_σ`` plain ones on stage ``σ``.

    Memory is the runtime's own accounting (:mod:`hydraulis.sharding.states`, :mod:`hydraulis.sharding.activations`), at the precision the
    runtime picks on the device (bf16 on an accelerator, fp32 on the ``cpu`` preset): model states
    of ``w + g`` bytes per parameter in the compute layout (weights and their fp32 gradients, 6
    under bf16) and 16 in the optimizer layout (fp32 master, reduced gradient and Adam moments), so
    ``α = 16/22``; a layer keeps what the runtime keeps for it under its option
    (:func:`~hydraulis.sharding.activations.layer_bytes_per_token`), the ends of a stage what
    they keep at their position and the working set of a backward
    (:func:`~hydraulis.sharding.activations.micro_batch_bytes_per_token`,
    :func:`~hydraulis.sharding.activations.transient_bytes_per_token`), so that::

          m_tok = max_σ ((pp − σ)·kept(σ) + transient(σ)) / cp

    Worked example, LLaMA-7B on A800 (R = 312 TFLOP/s, η_m = 0.7), scheme (1,1,2):
    ``b_flop = 6·(16·202.4M + 131M)/(218.4 T) ≈ 0.0925`` ms per token; the pipeline hand-off over
    NVLink adds ``4·4096 B / 200 GB/s ≈ 0.0001`` ms, so ``b ≈ 0.0926``; the measured pool says 0.0946.
    """
    variants = tuple(dict.fromkeys(variants))
    require(not segments or variants == (SchemeOptions(),), "options", [str(v) for v in variants],
            "are all in a space with variants: list none")
    listed = model.is_moe and segments
    if listed:
        variants, segments = EXPERT_VARIANTS, False
    schemes = [
        replace(variant, ep=ep).scheme(cp, tp, pp)
        for cp, tp, pp in itertools.product(sorted(set(cps)), sorted(set(tps)), sorted(set(pps)))
        if cp * tp * pp <= cluster.devices and model.shards(Scheme(cp, tp, pp))
        for variant in variants if tp > 1 or not variant.sp
        if not listed or tp == 1 or variant.sp
        for ep in expert_degrees(model, tp) if ep == 1 or variant.sp
    ]
    require(bool(schemes), "schemes", [], f"none of the degrees shards {model.name} on {cluster.devices} devices")
    degrees = {(s.cp, s.tp): None for s in schemes}
    multi_node = cluster.devices > cluster.devices_per_node
    return SchemeSpace(
        model=model,
        cluster=cluster,
        memory=analytic_memory_model(model, device),
        profiles=tuple(analytic_profile(model, device, cluster, s) for s in schemes),
        provenance=Provenance(SpaceSource.ANALYTIC, device.name, created, tool_version, command),
        pipeline_model=PipelineModel(p2p_ms=device.collective_latency_us / 1e3),
        reduce_gbps=device.inter_node_gbps if multi_node else device.intra_node_gbps,
        segments=tuple(analytic_segments(model, device, cluster, cp, tp, sp)
                       for cp, tp in degrees for sp in (False, True) if tp > 1 or not sp) if segments else (),
        communicator_ms=device.communicator_ms,
        reduce_overlap=device.reduce_overlap,
        grad_reduce_bytes=ReduceDtype.AUTO.element_bytes(device.name),
    )


EXPERT_VARIANTS = (SchemeOptions(), SchemeOptions(sp=True), SchemeOptions(recompute=Recompute.FULL),
                   SchemeOptions(sp=True, recompute=Recompute.FULL))
"""The variants a mixture of experts' analytic space lists for every degree."""


def expert_degrees(model: ModelSpec, tp: int) -> tuple[int, ...]:
    """The expert-parallel degrees an analytic space lists for a stage of ``tp`` ranks: 1 and, when
    it divides the experts, ``tp`` — the degrees the runtime runs (1 for a dense model). A degree
    between trades the experts' memory against all-to-all bytes; listing them all doubles the
    space and the planner's time for little (Mixtral-8x7B on 1,024 H100s chose ``ep = tp`` either way)."""
    return (1, tp) if model.is_moe and tp > 1 and model.experts % tp == 0 else (1,)


def analytic_memory_model(model: ModelSpec, device: DeviceSpec, device_memory_bytes: int | None = None) -> MemoryModel:
    """Model-state memory per :func:`~hydraulis.sharding.states.state_bytes` at the
    device's precision under Adam; the device's memory (or ``device_memory_bytes`` when
    measured), safety margin and communicators' bytes per peer."""
    state = state_bytes(device_precision(device.name), OptimizerKind.ADAM)
    return MemoryModel(
        device_memory_bytes=device.memory_bytes if device_memory_bytes is None else device_memory_bytes,
        safety_margin_bytes=device.safety_margin_bytes,
        layer_state_bytes=float(state.total * model.params_per_layer),
        embedding_state_bytes=float(state.total * model.embedding_params),
        sharded_state_fraction=state.optimizer / state.total,
        communicator_peer_bytes=device.communicator_peer_bytes,
    )


def analytic_profile(model: ModelSpec, device: DeviceSpec, cluster: Cluster, scheme: Scheme) -> SchemeProfile:
    """One scheme composed from its analytic segments (:func:`analytic_scheme_space`)."""
    segments = analytic_segments(model, device, cluster, scheme.cp, scheme.tp, scheme.sp, scheme.ep)
    return compose_profile(segments, model, scheme, cluster.devices_per_node,
                           device.runtime_overhead_bytes + device.workspace_bytes)


def analytic_segments(model: ModelSpec, device: DeviceSpec, cluster: Cluster, cp: int, tp: int, sp: bool,
                      ep: int = 1) -> Segments:
    """The layer of every recompute mode and the ends of a stage at every position, for
    ``(cp, tp, sp)`` and, of a mixture of experts, expert parallelism ``ep``
    (:func:`analytic_scheme_space`; the routed experts' terms: :mod:`.analytic_moe`)."""
    h, kv, v = model.hidden, model.kv_dim, model.vocab
    per_node = cluster.devices_per_node
    rate_ms = device.peak_tflops * 1e12 / 1e3
    beta_tp = _bytes_per_ms(device, tp <= per_node)
    beta_cp = _bytes_per_ms(device, tp * cp <= per_node)
    latency_ms = device.collective_latency_us / 1e3
    dtype_bytes = DTYPE_BYTES[device_precision(device.name)]
    widths = Widths.of(model, Scheme(cp, tp, 1, sp, ep=ep))

    def layer(recompute: Recompute) -> Block:
        full = recompute is Recompute.FULL
        b = (8.0 if full else 6.0) * model.dense_params_per_layer / (tp * cp * rate_ms * device.matmul_efficiency)
        b += (24.0 if full else 16.0) * h * (tp - 1) / tp / (cp * beta_tp)
        b += (16.0 if full else 12.0) * kv * (cp - 1) / cp / (tp * beta_cp)
        a = (7.0 if recompute is Recompute.NONE else 9.0) * model.heads * model.head_dim / (
            tp * cp * rate_ms * device.attention_efficiency)
        c = device.layer_overhead_us / 1e3 + latency_ms * ((12 if full else 8) * (tp > 1) + (4 if full else 3) * (cp - 1))
        routed = routed_layer_time(model, device, cluster, cp, tp, sp, ep, recompute, dtype_bytes)
        return Block(TimeCoefficients(a, b + routed.b, c + routed.c), layer_bytes_per_token(widths, recompute, dtype_bytes) / cp,
                     layer_backward_bytes_per_token(widths, recompute, dtype_bytes) / cp)

    def hand_off(inside_node: bool) -> TimeCoefficients:
        return TimeCoefficients(0.0, 4.0 * h / (tp * cp * _bytes_per_ms(device, inside_node)), 2.0 * latency_ms)

    head = TimeCoefficients(0.0, 6.0 * h * v / (tp * cp * rate_ms * device.matmul_efficiency), 0.0)
    inside, across = hand_off(True), hand_off(False)

    def ends(first: bool, last: bool) -> Block:
        neighbours = (not first) + (not last)
        time = TimeCoefficients(0.0, neighbours * inside.b + last * head.b, neighbours * inside.c)
        plain, full = ((micro_batch_bytes_per_token(widths, (mode,), first, last, dtype_bytes)
                        - layer_bytes_per_token(widths, mode, dtype_bytes)) for mode in (Recompute.NONE, Recompute.FULL))
        norm = norm_backward_bytes_per_token(widths, dtype_bytes)
        released = released_bytes_per_token(widths, dtype_bytes) if last else 0.0
        working = max(loss_bytes_per_token(widths, dtype_bytes), norm - released) if last else norm
        return Block(time, plain / cp, working / cp, (plain - full) / cp, released / cp)

    return Segments(cp, tp, sp, layer(Recompute.NONE), layer(Recompute.SELECTIVE), layer(Recompute.FULL),
                    first=ends(True, False), middle=ends(False, False), last=ends(False, True), only=ends(True, True),
                    network_hand_off=TimeCoefficients(0.0, across.b - inside.b, 0.0))


def _bytes_per_ms(device: DeviceSpec, inside_node: bool) -> float:
    return (device.intra_node_gbps if inside_node else device.inter_node_gbps) * 1e6

"""Staged pipelines on a mixed cluster: stage times, the exact schedule, memory per stage
(design §6.7).

A staged scheme ``cp | tp_0:L_0@g_0 > … > tp_{p−1}:L_{p−1}@g_{p−1}`` (:mod:`hydraulis.base.stages`)
runs stage ``σ`` on ``cp·tp_σ`` devices of device group ``g_σ``, whose scheme space
(:class:`~hydraulis.base.cluster.ClusterSpaces`) prices it.

**Stage time.** From ``g_σ``'s segments for ``(cp, tp_σ)`` (:mod:`hydraulis.base.segments`: the
decoder layer and the ends of a stage by position, measured or analytic), as
:func:`~hydraulis.base.segments.compose_profile` composes one stage, plus the hand-offs to
neighbours in another group over the cluster's link ``β_x`` (bf16 activations forward and their
gradients back, ``4·H`` bytes per token, through the narrower side's ``cp·min(tp_σ, tp_σ')``
links)::

The details: :func:`staged_cost`."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hydraulis.base.cluster import ClusterSpaces
from hydraulis.base.errors import HydraulisError, require
from hydraulis.base.segments import Block, Segments, in_flight_bytes_per_token, max_time, stage_block
from hydraulis.base.stages import Stage, stages_text
from hydraulis.base.types import OptimizerLayout, PipelineModel, Scheme, SchemeProfile, SchemeSpace, TimeCoefficients
from hydraulis.cost.memory import compute_states, optimizer_states, stage_memory_terms, step_terms
from hydraulis.cost.pipeline import simulate_1f1b_stages
from hydraulis.sharding.activations import ActivationCurve
from hydraulis.sharding.pipeline import PipelineSplit

HAND_OFF_BYTES_PER_HIDDEN = 4.0
"""Bytes per token and hidden unit a hand-off moves, forward and back (bf16 both ways)."""


@dataclass(frozen=True)
class StageMemory:
    """One stage's device: its memory, the reserved part (safety margin, runtime overhead and
    communicators' buffers), model states and activation bytes per micro-batch token (or, with the
    loss in chunks on a last stage, ``A(T)``, :class:`~hydraulis.cost.memory.MemoryBreakdown`)."""

    group: str
    device_memory_bytes: float
    reserved_bytes: float
    states_bytes: float
    activation_bytes_per_token: float
    gradient_bytes: float = 0.0
    exchange_bytes: float = 0.0
    activation_curves: tuple[ActivationCurve, ...] = ()

    @property
    def free_bytes(self) -> float:
        return self.device_memory_bytes - self.reserved_bytes - self.states_bytes - self.gradient_bytes

    @property
    def max_seq_len(self) -> int:
        if self.exchange_bytes > self.free_bytes:
            return 0
        if self.activation_curves:
            return min(curve.longest(self.free_bytes) for curve in self.activation_curves)
        return max(0, math.floor(self.free_bytes / self.activation_bytes_per_token))


@dataclass(frozen=True)
class StagedCost:
    """What the cost model predicts for one staged pipeline (:func:`staged_cost`)."""

    scheme: Scheme
    stage_times: tuple[TimeCoefficients, ...]
    memory: tuple[StageMemory, ...]
    pipeline_model: PipelineModel

    @property
    def bottleneck(self) -> TimeCoefficients:
        """Coefficient-wise largest stage time: the dispatcher's upper bound of every stage."""
        return max_time(self.stage_times)

    @property
    def max_seq_len(self) -> int:
        """The longest sequence (and micro-batch) every stage holds."""
        return min(m.max_seq_len for m in self.memory)

    def micro_batch_times(self, micro_batches: Sequence[Sequence[int]]) -> list[list[float]]:
        """``t_σ(mb_j)`` for every stage ``σ`` and micro-batch ``j`` (lengths per micro-batch)."""
        return [[t.microbatch_ms(mb) for mb in micro_batches] for t in self.stage_times]

    def pipeline_ms(self, micro_batches: Sequence[Sequence[int]]) -> float:
        """The exact 1F1B time of ``micro_batches`` (execution order) on this pipeline."""
        return simulate_1f1b_stages(self.micro_batch_times(micro_batches), self.pipeline_model).makespan_ms


def staged_cost(spaces: ClusterSpaces, scheme: Scheme, layout: OptimizerLayout | None = None) -> StagedCost:
    """Stage times and memory of ``scheme`` (staged; a plain scheme runs on the first group)
    on ``spaces``' cluster under ``layout`` (default ZeRO-1 over every device).

        B_σ    = E_σ(position) + L_σ·layer   (+ network_hand_off per neighbour when the pipeline's
                                                devices in g_σ span nodes)
        t_σ(mb) = c_σ + Σ_i (a_σ·s_i² + b_σ·s_i) + n^x_σ·h_x·Σ_i s_i
        h_x    = 4·H / (cp·min(tp_σ, tp_σ')·β_x·10⁶)   ms per token

    So the layer part is proportional to ``L_σ`` and the embedding (first stage) and output head
    and loss (last stage) come once. A measured space without segments gives per-layer
    coefficients from its plain profile ``(cp, tp_σ, p*)`` of the smallest profiled ``p*``:
    ``(a, b, c)/⌈L/p*⌉`` per layer, the embedding and head folded into the layers.

    **Pipeline time.** Micro-batch ``j`` takes ``t_σ(mb_j)`` on stage ``σ``: the exact 1F1B
    schedule with per-stage times (:func:`~hydraulis.cost.pipeline.simulate_1f1b_stages`), hand-off
    latency ``d`` the largest ``p2p_ms`` of the groups used. For dispatch, the *bottleneck*
    coefficients ``(max_σ a_σ, max_σ b_σ', max_σ c_σ)`` (``b'`` with the cross-group hand-off):
    every stage's time is at most the bottleneck's, and a 1F1B makespan only grows with its
    operations' durations, so the uniform schedule at the bottleneck is an upper bound of the
    staged one (equal when the stages are balanced).

    **Memory per stage**, on its own device (design §6.4 with the stage's own ``tp_σ``, ``L_σ``
    and device, :mod:`hydraulis.cost.memory`), under the cluster-wide optimizer layout (ZeRO-1 over
    all ``N`` devices unless given)::

        states_σ = (L_σ·B_layer·ρ(tp_σ) + n_σ·B_emb/tp_σ)·(1 − α) + (L·B_layer + 2·B_emb)·α/N
        m_σ      = (p − σ)·kept(B_σ) + transient(B_σ)        (1F1B keeps p − σ micro-batches)
        S_σ      = ⌊(M_g − safety_g − overhead_g − states_σ) / m_σ⌋,   S = min_σ S_σ

    Worked example (``examples/clusters/a100_h100.json``, LLaMA-13B analytic): ``1|8:20@a100>8:20@h100``
    has stage times ``b = 0.0267`` and ``0.0132`` ms per token (the H100's ~2.3× achievable matmul
    rate), so the A100 stage sets the pace; ``1|8:16@a100>8:24@h100`` has ``b = 0.0214`` and
    ``0.0157`` and runs 8 micro-batches of 8,192 tokens in 1,853 ms instead of 2,232 ms. Its stages
    hold 16,143 (A100, 2 micro-batches in flight) and 20,817 tokens (H100, 1 in flight).
    """
    cluster, model = spaces.cluster, spaces.model
    if not scheme.is_staged:
        scheme = uniform_staged(scheme, cluster.groups[0].name, model.layers)
    model.check_scheme(scheme)
    stages = resolved_stages(spaces, scheme.stages)
    _check_devices(spaces, scheme.cp, stages)
    parts = [stage_cost(spaces, scheme.cp, stages, sigma, layout) for sigma in range(len(stages))]
    pipeline_model = PipelineModel(spaces.spaces[0].pipeline_model.forward_fraction,
                                   max(spaces.space(s.group).pipeline_model.p2p_ms for s in stages))
    return StagedCost(scheme, tuple(t for t, _ in parts), tuple(m for _, m in parts), pipeline_model)


def resolved_stages(spaces: ClusterSpaces, stages: Sequence[Stage]) -> tuple[Stage, ...]:
    """``stages`` with every group named (a stage without one runs on the first group)."""
    return tuple(Stage(s.tp, s.layers, spaces.cluster.group(s.group).name) for s in stages)


def stage_cost(spaces: ClusterSpaces, cp: int, stages: Sequence[Stage], sigma: int,
               layout: OptimizerLayout | None = None) -> tuple[TimeCoefficients, StageMemory]:
    """Time and memory of stage ``sigma`` of a pipeline of ``stages`` (groups resolved) with
    ``cp``: they depend on its own tp, layers and group, its position, its neighbours' tp and
    groups and the devices the pipeline takes of its group — not on the other stages' layers."""
    stage, pp = stages[sigma], len(stages)
    space = spaces.space(stage.group)
    in_group = cp * sum(s.tp for s in stages if s.group == stage.group)
    shape = Scheme(cp, stage.tp, pp)
    time, block = stage_time(stage_segments(space, cp, stage.tp), shape, stages, sigma,
                             in_group > space.cluster.devices_per_node,
                             lambda mine, other: _hand_off_b(spaces, cp, mine, other))
    return time, _stage_memory(space, shape, sigma, stage, block, layout or OptimizerLayout(spaces.cluster.devices, 1, 1))


HandOffB = Callable[[Stage, Stage], float]
"""``h_x`` of :func:`staged_cost` between two stages of different groups, ms per token."""


def stage_time(segments: Segments, shape: Scheme, stages: Sequence[Stage], sigma: int, spans_nodes: bool,
               hand_off_b: HandOffB) -> tuple[TimeCoefficients, Block]:
    """``t_σ`` of :func:`staged_cost` and the block ``B_σ`` it comes from: stage ``sigma`` of
    ``stages`` composed from ``segments`` as one stage of ``shape`` (its cp, tp_σ, pp and
    recomputation), plus ``hand_off_b`` per neighbour in another group. The one composition of a
    staged stage: the cluster cost model's (:func:`stage_cost`) and a staged scheme's profile's
    (:func:`staged_profile`)."""
    stage = stages[sigma]
    block = stage_block(segments, shape, sigma, stage.layers, spans_nodes)
    hand_off = sum(hand_off_b(stage, stages[other]) for other in (sigma - 1, sigma + 1)
                   if 0 <= other < len(stages) and stages[other].group != stage.group)
    return TimeCoefficients(block.time.a, block.time.b + hand_off, block.time.c), block


def no_links(stage: Stage, other: Stage) -> float:
    """No hand-off cost between groups: one device kind, whose stages share its links."""
    return 0.0


def staged_profile(scheme: Scheme, segments_of: Callable[[int, int], Segments | None], devices_per_node: int,
                   overhead_bytes: int, hand_off_b: HandOffB = no_links) -> SchemeProfile:
    """The profile of the staged ``scheme``, each stage ``σ`` from ``segments_of(cp, tp_σ)`` by
    :func:`stage_time` (with its recomputation), as one scheme::

        time  = max_σ t_σ                              coefficient-wise, the slowest stage's
        m_tok = max_σ ((pp − σ)·kept_σ + transient_σ)  the most loaded stage's bytes per token

    E.g. ``1|2:3>1:1`` on tiny: stage 0 is 3 layers and the embedding at tp 2, stage 1 one layer
    and the head at tp 1; on one device kind (``no_links``) the slower stage sets the time."""
    spans_nodes = scheme.devices > devices_per_node
    times, per_token = [], []
    for sigma, stage in enumerate(scheme.stages):
        segments = segments_of(scheme.cp, stage.tp)
        if segments is None:
            raise HydraulisError("scheme", str(scheme), f"needs the segments of cp {scheme.cp}, tp {stage.tp} "
                                                        f"(stage {sigma}), which the scheme space lacks")
        shape = Scheme(scheme.cp, stage.tp, scheme.pp, False, scheme.recompute, scheme.recompute_layers)
        time, block = stage_time(segments, shape, scheme.stages, sigma, spans_nodes, hand_off_b)
        times.append(time)
        per_token.append(in_flight_bytes_per_token(block, scheme.pp - sigma))
    return SchemeProfile(scheme=scheme, time=max_time(times), activation_bytes_per_token=max(per_token),
                         overhead_bytes=overhead_bytes)


def staged_time_coefficients(spaces: ClusterSpaces, scheme: Scheme) -> TimeCoefficients:
    """The bottleneck coefficients of ``scheme`` (:func:`staged_cost`): the per-micro-batch time
    the dispatcher charges every stage of the pipeline."""
    return staged_cost(spaces, scheme).bottleneck


def uniform_staged(scheme: Scheme, group: str, layers: int) -> Scheme:
    """Plain ``(cp, tp, pp)`` on device group ``group`` as a staged scheme (the even split)."""
    return Scheme.staged(scheme.cp, tuple(Stage(scheme.tp, n, group) for n in scheme.stage_layers(layers)))


def stage_segments(space: SchemeSpace, cp: int, tp: int) -> Segments:
    """The segments of ``(cp, tp)`` without sequence parallelism in ``space``, or per-layer
    blocks derived from its plain profile of the smallest pipeline degree (:func:`staged_cost`)."""
    segments = space.segments_of(cp, tp, False)
    if segments is not None:
        return segments
    plain = sorted((p for p in space.profiles if (p.scheme.cp, p.scheme.tp) == (cp, tp) and not p.scheme.options),
                   key=lambda p: p.scheme.pp)
    if not plain:
        raise HydraulisError("scheme", f"cp {cp}, tp {tp}",
                             f"has no profile in the {space.cluster.device} space to price a stage with")
    profile = plain[0]
    per_stage = math.ceil(space.model.layers / profile.scheme.pp)
    t = profile.time
    layer = Block(TimeCoefficients(t.a / per_stage, t.b / per_stage, t.c / per_stage),
                  profile.activation_bytes_per_token / (profile.scheme.pp * per_stage))
    return Segments(cp, tp, False, layer, layer, layer)


def cluster_reduce_gbps(spaces: ClusterSpaces) -> float:
    """The gradient reduction's bandwidth on a mixed cluster: the slowest of the groups' own
    reduction bandwidths and the links between groups (0 when none is known)."""
    return min([s.reduce_gbps for s in spaces.spaces if s.reduce_gbps > 0]
               + [link.gbps for link in spaces.cluster.links], default=0.0)


def group_devices(cp: int, stages: Sequence[Stage]) -> dict[str, int]:
    """Devices of each group one pipeline of ``stages`` (groups resolved) and ``cp`` uses."""
    used: dict[str, int] = {}
    for stage in stages:
        used[stage.group] = used.get(stage.group, 0) + cp * stage.tp
    return used


def _check_devices(spaces: ClusterSpaces, cp: int, stages: Sequence[Stage]) -> None:
    for group, used in group_devices(cp, stages).items():
        have = spaces.cluster.group(group).devices
        require(used <= have, "scheme", stages_text(cp, tuple(stages)),
                f"needs {used} devices of group {group}, which has {have}")


def _hand_off_b(spaces: ClusterSpaces, cp: int, stage: Stage, other: Stage) -> float:
    gbps = spaces.cluster.link_gbps(stage.group, other.group)
    return HAND_OFF_BYTES_PER_HIDDEN * spaces.model.hidden / (cp * min(stage.tp, other.tp) * gbps * 1e6)


def _stage_memory(space: SchemeSpace, scheme: Scheme, sigma: int, stage: Stage, block: Block,
                  layout: OptimizerLayout) -> StageMemory:
    model, memory = space.model, space.memory
    matrices = (sigma == 0) + (sigma == scheme.pp - 1)
    compute = compute_states(memory, model, Scheme(scheme.cp, stage.tp, scheme.pp), stage.layers, matrices)
    optimizer = optimizer_states(memory, layout, math.ceil(model.layers / layout.pp), 2 if layout.pp == 1 else 1)
    overhead = max(p.overhead_bytes for p in space.profiles)
    gradient, exchange = step_terms(memory, model, PipelineSplit(scheme, scheme.stage_layers(model.layers)), sigma,
                                    compute)
    per_token = in_flight_bytes_per_token(block, scheme.pp - sigma)
    curves, communicators = stage_memory_terms(memory, model, scheme, sigma, stage.layers, per_token,
                                               max(layout.devices, space.cluster.devices))
    return StageMemory(stage.group, float(memory.device_memory_bytes),
                       float(memory.safety_margin_bytes + overhead) + communicators, compute + optimizer, per_token,
                       gradient, exchange, curves)

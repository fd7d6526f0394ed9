"""The profile of a staged scheme (design §18): each stage composed from the segments of its own tp.

A staged scheme's stages differ in tp and layers, so no one scheme's segments describe it. Stage
``σ`` is composed (:func:`hydraulis.segments.stage_block`) from the segments of ``(cp, tp_σ)`` —
a scheme space's (``hydraulis profile --variants all``), or the analytic model's
(:func:`hydraulis.profiler.analytic.analytic_segments`) — at its position in a pipeline of
``pp`` stages with its ``L_σ`` layers and recomputation, and the profile is that of
:func:`~hydraulis.segments.compose_profile` over these blocks::

    time  = max_σ B_σ.time                         coefficient-wise, the slowest stage's
    m_tok = max_σ ((pp − σ)·kept_σ + transient_σ)  the most loaded stage's bytes per token

E.g. ``1|2:3>1:1`` on tiny: stage 0 is 3 layers and the embedding at tp 2, stage 1 one layer and
the head at tp 1. Every stage is judged with the one set of segments given (one device kind:
the runtime's predicted times, ``hydraulis memory``); stages on the different device groups of
a mixed cluster take their group's segments in the planner's cluster cost model (design §18).
"""

from __future__ import annotations

from collections.abc import Callable

from hydraulis.errors import HydraulisError
from hydraulis.profiler.analytic import analytic_profile, analytic_segments
from hydraulis.segments import Segments, max_time, stage_block, stage_bytes_per_token
from hydraulis.types import Cluster, DeviceSpec, ModelSpec, Scheme, SchemeProfile, SchemeSpace


def staged_profile(scheme: Scheme, segments_of: Callable[[int, int], Segments | None], devices_per_node: int,
                   overhead_bytes: int) -> SchemeProfile:
    """The profile of the staged ``scheme`` from ``segments_of(cp, tp)`` (module docstring)."""
    across = scheme.devices > devices_per_node
    blocks = []
    for stage, s in enumerate(scheme.stages):
        segments = segments_of(scheme.cp, s.tp)
        if segments is None:
            raise HydraulisError("scheme", str(scheme), f"needs the segments of cp {scheme.cp}, tp {s.tp} "
                                                        f"(stage {stage}), which the scheme space lacks")
        plain = Scheme(scheme.cp, s.tp, scheme.pp, False, scheme.recompute, scheme.recompute_layers)
        blocks.append(stage_block(segments, plain, stage, s.layers, across))
    return SchemeProfile(
        scheme=scheme,
        time=max_time([b.time for b in blocks]),
        activation_bytes_per_token=max(stage_bytes_per_token(b, scheme.pp - stage) for stage, b in enumerate(blocks)),
        overhead_bytes=overhead_bytes,
    )


def analytic_profile_of(model: ModelSpec, device: DeviceSpec, cluster: Cluster, scheme: Scheme) -> SchemeProfile:
    """The analytic profile of ``scheme`` on ``device``, staged (module docstring) or not
    (:func:`~hydraulis.profiler.analytic.analytic_profile`)."""
    if not scheme.is_staged:
        return analytic_profile(model, device, cluster, scheme)
    return staged_profile(scheme, lambda cp, tp: analytic_segments(model, device, cluster, cp, tp, False),
                          cluster.devices_per_node, device.runtime_overhead_bytes)


def space_profile_of(space: SchemeSpace, scheme: Scheme) -> SchemeProfile:
    """``space``'s profile of ``scheme``: listed or composed (:meth:`~hydraulis.space.SchemeSpace.profile`),
    for a staged scheme from the space's segments (module docstring), with the overhead of its
    profiles'."""
    if not scheme.is_staged:
        return space.profile(scheme)
    overhead = max((p.overhead_bytes for p in space.profiles), default=0)
    return staged_profile(scheme, lambda cp, tp: space.segments_of(cp, tp, False), space.cluster.devices_per_node,
                          overhead)

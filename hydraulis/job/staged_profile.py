"""A staged scheme's profile for the runtime's predictions (design §9.2), on one device kind.

The composition is the cost model's (:func:`hydraulis.cost.staged.staged_profile`: each stage
from the segments of ``(cp, tp_σ)`` at its position, the slowest stage's time, the most loaded
stage's bytes per token); this module only says where the segments come from — a scheme space's
(``hydraulis profile --variants all``) or the analytic model's
(:func:`hydraulis.profiler.analytic.analytic_segments`). One device kind has no link between
groups to charge, so no stage pays a cross-group hand-off here; the planner's cluster cost model
(:func:`hydraulis.cost.staged.staged_cost`) charges it on a mixed cluster.
"""

from __future__ import annotations

from hydraulis.base.types import Cluster, DeviceSpec, ModelSpec, Scheme, SchemeProfile, SchemeSpace
from hydraulis.cost.staged import staged_profile
from hydraulis.profiler.analytic import analytic_profile, analytic_segments


def analytic_profile_of(model: ModelSpec, device: DeviceSpec, cluster: Cluster, scheme: Scheme) -> SchemeProfile:
    """The analytic profile of ``scheme`` on ``device``, staged (module docstring) or not
    (:func:`~hydraulis.profiler.analytic.analytic_profile`)."""
    if not scheme.is_staged:
        return analytic_profile(model, device, cluster, scheme)
    return staged_profile(scheme, lambda cp, tp: analytic_segments(model, device, cluster, cp, tp, False),
                          cluster.devices_per_node, device.runtime_overhead_bytes + device.workspace_bytes)


def space_profile_of(space: SchemeSpace, scheme: Scheme) -> SchemeProfile:
    """``space``'s profile of ``scheme``: listed or composed (:meth:`~hydraulis.base.space.SchemeSpace.profile`),
    for a staged scheme from the space's segments (module docstring), with the overhead of its
    profiles'."""
    if not scheme.is_staged:
        return space.profile(scheme)
    overhead = max((p.overhead_bytes for p in space.profiles), default=0)
    return staged_profile(scheme, lambda cp, tp: space.segments_of(cp, tp, False), space.cluster.devices_per_node,
                          overhead)

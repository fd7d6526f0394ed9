"""One scheme space per device group of a mixed cluster (design §7.4).

A group with a measured ``space`` keeps it (the caller reads it); every other group gets the
analytic space (:mod:`hydraulis.profiler.analytic`) of its device preset on its own
``nodes × devices_per_node`` devices, with segments — the decoder layer and the ends of a stage
per ``(cp, tp, sp)`` — from which the staged cost model composes any stage
(:mod:`hydraulis.cost.staged`).
"""

from __future__ import annotations

from collections.abc import Iterable

from hydraulis.base.cluster import DeviceGroup
from hydraulis.base.presets import device_preset
from hydraulis.base.types import Cluster, ModelSpec, SchemeSpace
from hydraulis.profiler.analytic import analytic_scheme_space

DEFAULT_DEGREES = (1, 2, 4, 8)


def group_cluster(group: DeviceGroup) -> Cluster:
    """The one-type cluster of ``group``: its devices, per node, its device preset."""
    return Cluster(group.devices, group.devices_per_node, group.device)


def group_scheme_space(group: DeviceGroup, model: ModelSpec, created: str, tool_version: str, command: str = "",
                       cps: Iterable[int] = DEFAULT_DEGREES, tps: Iterable[int] = DEFAULT_DEGREES,
                       pps: Iterable[int] = DEFAULT_DEGREES) -> SchemeSpace:
    """The analytic scheme space of ``model`` on ``group``, with segments."""
    return analytic_scheme_space(model, device_preset(group.device), group_cluster(group), cps, tps, pps,
                                 created=created, tool_version=tool_version, command=command, segments=True)

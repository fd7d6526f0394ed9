"""A cluster of several device types: device groups and the links between them (design §7.4).

A :class:`DeviceGroup` is ``nodes`` nodes of ``devices_per_node`` devices of one kind — a
device preset of ``resources/presets.json`` (e.g. ``a100-80g``, ``h100-80g``) — optionally with
the path of a scheme space measured on it (otherwise the space is derived analytically from the
preset, :func:`hydraulis.profiler.cluster.group_scheme_space`). A :class:`ClusterDescription`
lists the groups, in the order a staged pipeline's stages may use them, and the inter-node
bandwidth in GB/s between every pair of groups (:class:`GroupLink`); inside a group the device
preset's own links apply.

Example (``examples/clusters/a100_h100.json``): groups ``a100`` (2 nodes × 8 ``a100-80g``) and
``h100`` (2 nodes × 8 ``h100-80g``), one link ``a100``–``h100`` of 25 GB/s: 32 devices. Stage
groups of a staged scheme (:class:`~hydraulis.base.stages.Stage`) name these groups.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hydraulis.base.errors import HydraulisError, require, require_int, require_number
from hydraulis.base.limits import BANDWIDTH_GBPS, DEVICES, DEVICES_PER_NODE
from hydraulis.base.placement import RankRange
from hydraulis.base.types import ModelSpec, SchemeSpace

_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


@dataclass(frozen=True)
class DeviceGroup:
    """``nodes`` × ``devices_per_node`` devices of preset ``device``; ``space`` the path of a
    scheme space measured on them ("" = derive one analytically)."""

    name: str
    device: str
    nodes: int
    devices_per_node: int
    space: str = ""

    def __post_init__(self) -> None:
        require(isinstance(self.name, str) and _NAME.match(self.name) is not None, "group.name", self.name,
                "must be a device group name (letters, digits, _ . -)")
        require(isinstance(self.device, str) and bool(self.device), "group.device", self.device,
                "must name a device preset")
        require_int(self.nodes, "group.nodes", minimum=1)
        DEVICES_PER_NODE.check(self.devices_per_node, "group.devices_per_node")
        DEVICES.check(self.devices, "group.devices")
        require(isinstance(self.space, str), "group.space", self.space, "must be a path or empty")

    @property
    def devices(self) -> int:
        return self.nodes * self.devices_per_node


@dataclass(frozen=True)
class GroupLink:
    """Inter-node bandwidth ``gbps`` (GB/s per device) between groups ``first`` and ``second``."""

    first: str
    second: str
    gbps: float

    def __post_init__(self) -> None:
        require(self.first != self.second, "link.groups", [self.first, self.second],
                "must name two different groups (inside a group the device preset's links apply)")
        BANDWIDTH_GBPS.check(require_number(self.gbps, "link.gbps"), "link.gbps")

    def joins(self, a: str, b: str) -> bool:
        return {a, b} == {self.first, self.second}


@dataclass(frozen=True)
class ClusterDescription:
    """Device groups (order matters: a staged pipeline's stages run through them in this
    order) and a link between every pair of them."""

    groups: tuple[DeviceGroup, ...]
    links: tuple[GroupLink, ...] = ()

    def __post_init__(self) -> None:
        require(len(self.groups) > 0, "groups", [], "must list at least one device group")
        names = [g.name for g in self.groups]
        for i, name in enumerate(names):
            require(name not in names[:i], f"groups[{i}].name", name, "is listed twice")
        for i, link in enumerate(self.links):
            for end in (link.first, link.second):
                require(end in names, f"links[{i}].groups", end, f"is not a device group ({', '.join(names)})")
            require(not any(other.joins(link.first, link.second) for other in self.links[:i]),
                    f"links[{i}].groups", [link.first, link.second], "are linked twice")
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                require(any(link.joins(a, b) for link in self.links), "links", [a, b],
                        "must give the bandwidth between every pair of device groups")
        DEVICES.check(self.devices, "cluster.devices")

    @property
    def devices(self) -> int:
        return sum(g.devices for g in self.groups)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(g.name for g in self.groups)

    def group(self, name: str) -> DeviceGroup:
        """The group called ``name``; an error naming it otherwise."""
        for group in self.groups:
            if group.name == name:
                return group
        raise HydraulisError("group", name, f"is not a device group of the cluster ({', '.join(self.names)})")

    def rank_ranges(self) -> tuple[RankRange, ...]:
        """The ranks of every group as a launcher numbers them, group by group in this order
        (:func:`hydraulis.base.placement.stage_offsets`): ``a100_h100.json`` → ``a100`` ranks 0–15,
        ``h100`` ranks 16–31."""
        starts = [sum(g.devices for g in self.groups[:i]) for i in range(len(self.groups))]
        return tuple(RankRange(g.name, start, g.devices) for g, start in zip(self.groups, starts))

    def link_gbps(self, a: str, b: str) -> float:
        """The inter-node bandwidth between groups ``a`` and ``b`` (``a ≠ b``)."""
        for link in self.links:
            if link.joins(a, b):
                return link.gbps
        raise HydraulisError("links", [a, b], "holds no bandwidth between these groups")


@dataclass(frozen=True)
class ClusterSpaces:
    """A cluster description with one scheme space per device group (in group order), all of
    one model: what the mixed-cluster cost model and planner read."""

    cluster: ClusterDescription
    spaces: tuple[SchemeSpace, ...]

    def __post_init__(self) -> None:
        require(len(self.spaces) == len(self.cluster.groups), "spaces", len(self.spaces),
                f"must hold one scheme space per device group ({len(self.cluster.groups)})")
        model = self.spaces[0].model
        for group, space in zip(self.cluster.groups, self.spaces):
            require(space.model.matches(model), f"groups.{group.name}.space", space.model.name,
                    f"is not a space of {model.name}, the other groups' model")

    @property
    def model(self) -> ModelSpec:
        return self.spaces[0].model

    def space(self, group: str) -> SchemeSpace:
        """The scheme space of ``group`` ("" = the first group)."""
        return self.spaces[self.cluster.names.index(self.cluster.group(group).name) if group else 0]

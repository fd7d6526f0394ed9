"""The pipelines a mixed cluster can run (design §7.4): plain schemes on one device group, and
staged pipelines across groups from the per-pipeline split.

Every option is a staged scheme whose stages name their groups (a plain ``(cp, tp, pp)`` on
group ``g`` is ``cp|tp:L_0@g>…`` with the even split), with the devices it takes of each group,
its bottleneck time coefficients (what dispatch charges every stage,
:mod:`hydraulis.cost.staged`) and the longest sequence every stage holds on its own device.

* **Type-segregated**: every plain scheme of each group's space that tiles the group's nodes
  (its devices divide a node or are whole nodes) and holds a sequence.
* **Cross-type**: for every ordered pair of groups, device budgets ``(D_1, D_2)`` from
  ``budgets`` (each within its group, tiling nodes), every ``cp`` and every longest-sequence
  target ``S·f`` (``f`` in ``targets``): the Pareto front of the split's tp choices
  (:func:`~hydraulis.planner.split.split_options`). Several targets give several trade-offs:
  a pipeline made to hold ``S`` keeps more memory free per stage (fewer layers on the stage that
  keeps the most micro-batches in flight), one made for ``S/8`` balances time alone.

An option no faster than another of the same per-group devices that holds at least as much
(every coefficient ≥, capacity ≤) is dropped.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from hydraulis.base.cluster import ClusterSpaces
from hydraulis.base.types import Scheme, TimeCoefficients
from hydraulis.cost.staged import staged_cost, uniform_staged
from hydraulis.planner.split import GroupBudget, SplitRequest, split_options


@dataclass(frozen=True)
class MixedOption:
    """One pipeline kind: ``usage[g]`` devices of group ``g`` (cluster order)."""

    scheme: Scheme
    usage: tuple[int, ...]
    time: TimeCoefficients
    max_seq_len: int

    @property
    def cross(self) -> bool:
        return sum(u > 0 for u in self.usage) > 1

    @property
    def devices(self) -> int:
        return sum(self.usage)


@dataclass(frozen=True)
class OptionsConfig:
    """Which cross-type pipelines to build (module docstring)."""

    max_seq_len: int
    cps: tuple[int, ...] = (1, 2, 4)
    budgets: tuple[int, ...] = (4, 8, 16)
    targets: tuple[float, ...] = (1.0, 0.5, 0.25, 0.125)


def mixed_options(spaces: ClusterSpaces, config: OptionsConfig, cross: bool = True) -> tuple[MixedOption, ...]:
    """The type-segregated options and, with ``cross``, the cross-type ones (module docstring)."""
    found = [option for scheme in _plain_schemes(spaces) if (option := _option(spaces, scheme)) is not None]
    if cross:
        found += [option for scheme in _cross_schemes(spaces, config) if (option := _option(spaces, scheme)) is not None]
    return _undominated(found)


def _plain_schemes(spaces: ClusterSpaces) -> list[Scheme]:
    layers = spaces.model.layers
    schemes = []
    for group, space in zip(spaces.cluster.groups, spaces.spaces):
        for profile in space.profiles:
            plain = profile.scheme
            if plain.options or plain.devices > group.devices or not _tiles(plain.devices, group.devices_per_node):
                continue
            schemes.append(uniform_staged(plain, group.name, layers))
    return schemes


def _cross_schemes(spaces: ClusterSpaces, config: OptionsConfig) -> list[Scheme]:
    groups = spaces.cluster.groups
    schemes: dict[Scheme, None] = {}
    for first, second in itertools.permutations(groups, 2):
        for d1, d2 in itertools.product(config.budgets, repeat=2):
            if d1 > first.devices or d2 > second.devices or not (_tiles(d1, first.devices_per_node)
                                                                  and _tiles(d2, second.devices_per_node)):
                continue
            for cp, fraction in itertools.product(config.cps, config.targets):
                request = SplitRequest(cp, (GroupBudget(first.name, d1), GroupBudget(second.name, d2)),
                                       max(1, int(config.max_seq_len * fraction)))
                for split in split_options(spaces, request):
                    schemes[split.scheme] = None
    return list(schemes)


def _option(spaces: ClusterSpaces, scheme: Scheme) -> MixedOption | None:
    cost = staged_cost(spaces, scheme)
    if cost.max_seq_len < 1:
        return None
    usage = tuple(scheme.cp * sum(s.tp for s in scheme.stages if s.group == g) for g in spaces.cluster.names)
    return MixedOption(scheme, usage, cost.bottleneck, cost.max_seq_len)


def _undominated(options: Sequence[MixedOption]) -> tuple[MixedOption, ...]:
    def dominates(x: MixedOption, y: MixedOption) -> bool:
        return (x.usage == y.usage and x.max_seq_len >= y.max_seq_len and x.time.a <= y.time.a
                and x.time.b <= y.time.b and x.time.c <= y.time.c and x.scheme.pp <= y.scheme.pp)

    kept = []
    for i, option in enumerate(options):
        if not any(dominates(other, option) and (not dominates(option, other) or j < i)
                   for j, other in enumerate(options) if j != i):
            kept.append(option)
    return tuple(kept)


def _tiles(devices: int, per_node: int) -> bool:
    """A pipeline's share of a group lies within a node (dividing it) or takes whole nodes."""
    return per_node % devices == 0 if devices < per_node else devices % per_node == 0

"""The schemes a proposal may use, with what the planner needs to know about each.

A scheme ``k`` is an *option* when, under the optimizer layout,

* it holds a sequence at all (``S_k > 0``) and uses at most ``N`` devices;
* its pipelines tile nodes of ``n`` devices: ``D_k`` divides ``n`` (several pipelines share a
  node, none straddles two) or is a multiple of ``n`` (it takes ``D_k/n`` whole nodes);
* no other option with the same devices dominates it: ``S ≥ S_k``, ``a, b, c ≤``, ``pp ≤``
  and reduction time ≤ (one-for-one replacement then never hurts).

**Node packing lemma.** With ``N`` a multiple of ``n`` and sizes that divide ``n`` (powers of
two when ``n`` is) or are multiples of it, a multiset of pipelines can be placed on the nodes
iff ``Σ D ≤ N``: the large ones take ``Σ D_big/n`` whole nodes; the small ones, sorted by size
and placed first-fit, fill the remaining nodes without gaps because each size divides every
larger one. So the integer programs need only the device budget, and the validator checks
the placement itself.

``reduce_ms`` is the gradient reduction a pipeline of the scheme brings into a step
(:func:`hydraulis.cost.reduce_ms`, the least sharded pipeline decides), taken for a step with
several pipelines; a lone pipeline laid out like the optimizer needs none, which the step
evaluation (planner/evaluate.py) counts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hydraulis.base.errors import HydraulisError
from hydraulis.base.types import (
    LOSS_CHUNK_TOKENS,
    OptimizerLayout,
    PipelineGroup,
    Proposal,
    Scheme,
    SchemeSpace,
    TimeCoefficients,
)
from hydraulis.cost import MemoryBreakdown, exposed_reduce_ms, reduction_model, scheme_capacities
from hydraulis.planner.variants import with_schemes


@dataclass(frozen=True)
class SchemeOption:
    """A usable scheme under the proposal's optimizer layout."""

    scheme: Scheme
    time: TimeCoefficients
    capacity: int
    memory: MemoryBreakdown
    reduce_ms: float

    @property
    def devices(self) -> int:
        return self.scheme.devices

    def dominates(self, other: SchemeOption) -> bool:
        """Same devices and at least as good in every respect."""
        return (self.devices == other.devices and self.capacity >= other.capacity
                and self.time.a <= other.time.a and self.time.b <= other.time.b
                and self.time.c <= other.time.c and self.scheme.pp <= other.scheme.pp
                and self.reduce_ms <= other.reduce_ms)


def planning_space(space: SchemeSpace, devices: int, devices_per_node: int) -> SchemeSpace:
    """``space`` on a cluster of ``devices`` devices, ``devices_per_node`` per node; raises
    when no scheme fits in the devices at all."""
    smallest = min(p.scheme.devices for p in space.profiles)
    if smallest > devices:
        raise HydraulisError("devices", devices, f"is smaller than every scheme of the space "
                                                 f"(the smallest uses {smallest} devices)")
    return replace(space, cluster=replace(space.cluster, devices=devices, devices_per_node=devices_per_node))


def scheme_options(space: SchemeSpace, layout: OptimizerLayout, node_size: int,
                   loss_chunk: int = LOSS_CHUNK_TOKENS) -> tuple[tuple[SchemeOption, ...], tuple[str, ...]]:
    """The options of ``space`` (its cluster is the planning cluster) and a note per scheme left out,
    memory with the runtime's loss in chunks of ``loss_chunk`` tokens."""
    devices = space.cluster.devices
    notes, usable = [], []
    for capacity in scheme_capacities(space, layout, loss_chunk):
        scheme = capacity.profile.scheme
        problem = _unusable(scheme.devices, capacity.max_seq_len, devices, node_size)
        if problem:
            notes.append(f"{scheme} left out: {problem}")
            continue
        group = PipelineGroup(scheme, 1, capacity.max_seq_len, capacity.profile.time)
        usable.append(SchemeOption(scheme, capacity.profile.time, capacity.max_seq_len, capacity.memory,
                                   exposed_reduce_ms(space.model.params, (group, group), layout, reduction_model(space))))
    options = []
    for option in usable:
        better = next((o for o in usable if o is not option and o.dominates(option)
                       and (not option.dominates(o) or usable.index(o) < usable.index(option))), None)
        if better is not None:
            notes.append(f"{option.scheme} left out: dominated by {better.scheme}")
        else:
            options.append(option)
    if not options:
        raise HydraulisError("devices", devices, f"leaves no usable scheme ({'; '.join(notes)})")
    return tuple(options), tuple(notes)


def proposal_options(space: SchemeSpace, proposal: Proposal) -> tuple[SchemeOption, ...]:
    """The schemes the planner could use for ``proposal``'s cluster and optimizer layout (with
    the variants the proposal uses, which a space with segments composes)."""
    proposed = [g.scheme for p in proposal.strategies for g in p.strategy.pipelines]
    planning = planning_space(with_schemes(space, proposed), proposal.devices, proposal.devices_per_node)
    options, _ = scheme_options(planning, proposal.optimizer_layout, min(proposal.devices, proposal.devices_per_node),
                                proposal.loss_chunk_tokens)
    return options


def synthesis_schemes(space: SchemeSpace, proposal: Proposal) -> tuple[PipelineGroup, ...]:
    """:func:`proposal_options` as one-pipeline groups: the schemes a strategy made for one
    step may use with ``--synthesise space`` (:mod:`hydraulis.dispatch.synthesis`)."""
    return tuple(PipelineGroup(o.scheme, 1, o.capacity, o.time) for o in proposal_options(space, proposal))


def _unusable(scheme_devices: int, capacity: int, devices: int, node_size: int) -> str:
    if capacity <= 0:
        return "its model states leave no memory for activations"
    if scheme_devices > devices:
        return f"it needs {scheme_devices} devices, more than the {devices} planned"
    if node_size % scheme_devices and scheme_devices % node_size:
        return f"{scheme_devices} devices neither divide nor fill whole nodes of {node_size}"
    return ""

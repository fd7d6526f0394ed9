"""Is a proposal usable? Every rule it breaks, each named by the field that breaks it.

Structure (always): the optimizer layout shards the model and divides the devices; every
strategy uses at most ``N`` devices and can be placed on the nodes (pipelines of ``D ≥ n``
devices take ``D/n`` whole nodes, smaller ones lie inside one node, placed first-fit
decreasing); every scheme shards the model; every strategy holds the longest sequence of the
steps it serves; the serving ranges cover ``(0, max_seq_len]``; some pipeline holds
``max_seq_len``. With the scheme space (``space``): the model is the space's, every scheme is
in it with the same time coefficients, and every pipeline's ``max_seq_len`` fits memory under
the optimizer layout (cost/memory.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hydraulis.base.errors import HydraulisError
from hydraulis.base.types import Proposal, SchemeSpace, Strategy
from hydraulis.cost import memory_breakdown


@dataclass(frozen=True)
class Violation:
    """One broken rule: where (a JSON path of the proposal), what value, what is wrong."""

    field: str
    value: Any
    problem: str

    def __str__(self) -> str:
        return f"{self.field}: {self.value!r} {self.problem}"


def validate_proposal(proposal: Proposal, space: SchemeSpace | None = None) -> Proposal:
    """``proposal`` unchanged, or :class:`HydraulisError` naming the first violation (and how
    many more there are)."""
    violations = proposal_violations(proposal, space)
    if violations:
        first = violations[0]
        more = f" (and {len(violations) - 1} more violations)" if len(violations) > 1 else ""
        raise HydraulisError(first.field, first.value, first.problem + more)
    return proposal


def proposal_violations(proposal: Proposal, space: SchemeSpace | None = None) -> tuple[Violation, ...]:
    """Every rule of the module docstring that ``proposal`` breaks."""
    found = _layout(proposal)
    for i, proposed in enumerate(proposal.strategies):
        found += _strategy(proposal, proposed.strategy, f"strategies[{i}]", proposed.serves_to)
    found += _coverage(proposal)
    if space is not None:
        found += _memory(proposal, space)
    return tuple(found)


def node_placement(strategy: Strategy, devices: int, devices_per_node: int) -> str:
    """Why ``strategy`` cannot be placed on ``devices`` devices in nodes of ``devices_per_node``
    ("" when it can)."""
    full, partial = divmod(devices, devices_per_node)
    free = [devices_per_node] * full + ([partial] if partial else [])
    small = []
    for group in strategy.pipelines:
        size = group.scheme.devices
        if size < devices_per_node:
            small += [size] * group.count
        elif size % devices_per_node:
            return f"a pipeline of {size} devices neither fits in a node nor fills whole nodes of {devices_per_node}"
        else:
            for _ in range(group.count * size // devices_per_node):
                if devices_per_node not in free:
                    return f"pipelines of {devices_per_node} or more devices need more whole nodes than the {full} there are"
                free.remove(devices_per_node)
    for size in sorted(small, reverse=True):
        node = next((i for i, room in enumerate(free) if room >= size), -1)
        if node < 0:
            return f"a pipeline of {size} devices finds no node with {size} free devices (first-fit decreasing)"
        free[node] -= size
    return ""


def _layout(proposal: Proposal) -> list[Violation]:
    try:
        proposal.optimizer_layout.check(proposal.model, proposal.devices)
    except HydraulisError as error:
        return [Violation(error.field, error.value, error.problem)]
    return []


def _strategy(proposal: Proposal, strategy: Strategy, path: str, serves_to: int) -> list[Violation]:
    found = []
    if strategy.devices > proposal.devices:
        found.append(Violation(f"{path}.devices", strategy.devices,
                               f"exceeds the proposal's {proposal.devices} devices"))
    placement = node_placement(strategy, proposal.devices, proposal.devices_per_node)
    if placement:
        found.append(Violation(f"{path}.pipelines", str(strategy), f"cannot be placed on the nodes: {placement}"))
    for j, group in enumerate(strategy.pipelines):
        try:
            proposal.model.check_scheme(group.scheme, f"{path}.pipelines[{j}].scheme")
        except HydraulisError as error:
            found.append(Violation(error.field, error.value, error.problem))
    if strategy.max_seq_len < serves_to:
        found.append(Violation(f"{path}.serves_to", serves_to,
                               f"exceeds the longest sequence its pipelines hold ({strategy.max_seq_len})"))
    return found


def _coverage(proposal: Proposal) -> list[Violation]:
    found, covered = [], 0
    for proposed in sorted(proposal.strategies, key=lambda p: p.serves_from):
        if proposed.serves_from > covered:
            found.append(Violation("strategies", f"({covered}, {proposed.serves_from}]",
                                   "is a range of longest-sequence lengths that no strategy serves"))
        covered = max(covered, proposed.serves_to)
    if covered < proposal.max_seq_len:
        found.append(Violation("strategies", f"({covered}, {proposal.max_seq_len}]",
                               "is a range of longest-sequence lengths that no strategy serves"))
    longest = max(p.strategy.max_seq_len for p in proposal.strategies)
    if longest < proposal.max_seq_len:
        found.append(Violation("max_seq_len", proposal.max_seq_len,
                               f"is held by no pipeline (the longest holds {longest})"))
    return found


def _memory(proposal: Proposal, space: SchemeSpace) -> list[Violation]:
    if space.model != proposal.model:
        return [Violation("model", proposal.model.name, f"differs from the scheme space's model {space.model.name}")]
    found = []
    for i, proposed in enumerate(proposal.strategies):
        for j, group in enumerate(proposed.strategy.pipelines):
            path = f"strategies[{i}].pipelines[{j}]"
            try:
                profile = space.profile(group.scheme)
            except HydraulisError:
                found.append(Violation(f"{path}.scheme", str(group.scheme), "is not in the scheme space"))
                continue
            if profile.time != group.time:
                found.append(Violation(f"{path}.time", group.time, "differs from the scheme space's coefficients"))
            memory = memory_breakdown(space.memory, space.model, profile, proposal.optimizer_layout,
                                      space.cluster.devices, proposal.loss_chunk_tokens)
            if group.max_seq_len > memory.max_seq_len:
                found.append(Violation(f"{path}.max_seq_len", group.max_seq_len,
                                       f"does not fit memory: scheme {group.scheme} holds {memory.max_seq_len} "
                                       f"tokens under optimizer layout {proposal.optimizer_layout}"))
    return found

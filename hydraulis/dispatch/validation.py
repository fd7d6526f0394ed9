"""Checks dispatch makes on its inputs before planning (the planner owns the full proposal
validator; these are the structural facts dispatch relies on)."""

from __future__ import annotations

from hydraulis.base.errors import HydraulisError, require
from hydraulis.base.types import BatchingMethod, Proposal


def batching_method(method: BatchingMethod | str) -> BatchingMethod:
    """``method`` as a :class:`BatchingMethod`, or an error listing the valid names."""
    try:
        return BatchingMethod(method)
    except ValueError:
        raise HydraulisError("method", method, f"must be one of {[m.value for m in BatchingMethod]}") from None


def check_proposal(proposal: Proposal) -> None:
    """Raise unless every strategy fits the proposal's devices, every scheme shards the model,
    the optimizer layout fits, and every pipeline's time grows with its work."""
    require(isinstance(proposal, Proposal), "proposal", type(proposal).__name__, "must be a Proposal")
    proposal.optimizer_layout.check(proposal.model, proposal.devices)
    for i, proposed in enumerate(proposal.strategies):
        devices = proposed.strategy.devices
        require(devices <= proposal.devices, f"strategies[{i}].devices", devices,
                f"exceeds the proposal's {proposal.devices} devices")
        for j, group in enumerate(proposed.strategy.pipelines):
            field = f"strategies[{i}].pipelines[{j}]"
            proposal.model.check_scheme(group.scheme, f"{field}.scheme")
            require(group.time.a + group.time.b > 0, f"{field}.time", f"a={group.time.a}, b={group.time.b}",
                    "must not both be 0 (a pipeline's time must grow with its tokens)")

"""A proposal in words and rows: what ``hydraulis propose`` prints and what a training run shows
in TensorBoard (the runtime's ``tensorboard``)."""

from __future__ import annotations

from collections.abc import Sequence

from hydraulis.base.types import Proposal, ProposedStrategy

GIB = 2**30
STRATEGY_COLUMNS = ("strategy", "serves", "pipelines", "devices", "max_seq_len", "predicted_ms", "reduce_ms",
                    "headroom_GiB")


def proposal_heading(proposal: Proposal) -> str:
    return (f"{proposal.model.name} on {proposal.devices} devices ({proposal.devices_per_node} per node), "
            f"optimizer layout {proposal.optimizer_layout}, {proposal.token_budget} tokens per step, "
            f"max_seq_len {proposal.max_seq_len}")


def strategy_rows(strategies: Sequence[ProposedStrategy]) -> list[list[object]]:
    """One row per strategy under :data:`STRATEGY_COLUMNS` (per pipeline group: longest
    sequence and memory headroom, joined by ``/``)."""
    rows = []
    for i, proposed in enumerate(strategies):
        groups = proposed.strategy.pipelines
        rows.append([i, f"({proposed.serves_from}, {proposed.serves_to}]", str(proposed.strategy),
                     proposed.strategy.devices, "/".join(str(g.max_seq_len) for g in groups),
                     round(proposed.predicted_ms, 1), round(proposed.reduce_ms, 1),
                     "/".join(f"{h / GIB:.1f}" for h in proposed.headroom_bytes)])
    return rows

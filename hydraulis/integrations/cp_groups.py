"""Hybrid context-parallel groups planned by dispatch, and the step time of any such plan.

**The format** (Megatron-Core's ``get_groups_and_subsamples``): ``groups[g][r]`` lists the
samples DP×CP rank ``r`` runs in group ``g``, in order; a sample listed on ``k`` ranks of a group
runs with context-parallel size ``k`` on them, and the ranks meet at a barrier after each group.

**Cost** (design §6.1 per rank, the barrier between groups):

    T = Σ_g max_r Σ_{i ∈ groups[g][r]} t_{k_i}(s_i),       t_k(s) = c_k + a_k·s² + b_k·s

— the fixed cost ``c`` once per sub-sample, as Megatron's schedule runs them (``fixed =
subsample``), or once per rank and group (``fixed = group``: ``max_r (c + Σ_i w_{k_i}(s_i))``).
Worked example: one group, rank 0 runs a 4K sample alone, ranks 1–2 share an 8K one (``k = 2``):
``T = max(t_1(4K), t_2(8K))``.

**Planning**: :func:`~hydraulis.integrations.cp_plan.plan_cp_groups`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np

from hydraulis.base.errors import require
from hydraulis.integrations.cp_ranks import CPRanks


class FixedCost(str, Enum):
    """Where the fixed cost ``c`` of :func:`plan_cp_groups` is paid."""

    SUBSAMPLE = "subsample"
    GROUP = "group"


@dataclass(frozen=True)
class CPGroups:
    """``groups[g][r]``: the sample indices rank ``r`` runs in group ``g``, in order."""

    groups: tuple[tuple[tuple[int, ...], ...], ...]

    def __post_init__(self) -> None:
        require(len(self.groups) > 0, "groups", [], "must hold at least one group")
        ranks = len(self.groups[0])
        for g, group in enumerate(self.groups):
            require(len(group) == ranks, f"groups[{g}]", len(group), f"must list {ranks} ranks")

    @property
    def ranks(self) -> int:
        return len(self.groups[0])

    def holders(self, g: int) -> dict[int, list[int]]:
        """Sample → the ranks that list it in group ``g`` (ascending)."""
        found: dict[int, list[int]] = {}
        for r, samples in enumerate(self.groups[g]):
            for i in samples:
                found.setdefault(i, []).append(r)
        return found


def cp_step_ms(plan: CPGroups, lengths: Sequence[int] | np.ndarray, ranks: CPRanks,
               fixed: FixedCost = FixedCost.SUBSAMPLE) -> float:
    """``T`` of :func:`plan_cp_groups`; every sample's ``k`` must be an option of ``ranks``."""
    lengths = np.asarray(lengths, dtype=np.int64)
    total = 0.0
    for g, group in enumerate(plan.groups):
        cp = {i: len(r) for i, r in plan.holders(g).items()}
        slowest = 0.0
        for samples in group:
            options = [ranks.option(cp[i]) for i in samples]
            work = sum(o.ms(int(lengths[i])) - o.time.c for o, i in zip(options, samples))
            if fixed is FixedCost.SUBSAMPLE:
                work += sum(o.time.c for o in options)
            elif options:
                work += max(o.time.c for o in options)
            slowest = max(slowest, work)
        total += slowest
    return total

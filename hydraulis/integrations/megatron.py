"""``HydraulisCPScheduler``: Megatron-Core's hybrid context-parallel scheduler, planned by
Hydraulis (docs/integrations.md).

A drop-in for ``megatron.core.pipeline_parallel.hybrid_cp_schedule.BalancedCPScheduler``
(megatron-core 0.16): the same constructor arguments plus the scheme ``space`` (a
:class:`~hydraulis.types.SchemeSpace` or the path of one) and ``tp``, and the same
``get_groups_and_subsamples(sample_id_seqlens, config) -> (groups, sample_id_groups)``.
The plan is :func:`~hydraulis.integrations.cp_groups.plan_cp_groups`: one group whose aligned
blocks of ``k`` ranks run their samples with context-parallel size ``k``, balanced on the
space's ``(k, tp, 1)`` time ``c_k + a_k·s² + b_k·s`` per sample, every sample within what its
``k`` ranks hold (``min(S_k, k·max_seq_len_per_rank)``).

Wiring (Megatron's wrapper builds its own scheduler; replace it)::

    wrapper = HybridCPDataLoaderWrapper(data_iterator, config, pg_collection)
    wrapper.cp_balancing_scheduler = HydraulisCPScheduler(
        config.max_seqlen_per_dp_cp_rank, wrapper.dp_cp_group, space="space.json", tp=8)

Nothing here imports torch or Megatron: the group is only asked its ``size()``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from hydraulis.artifacts.scheme_space import read_scheme_space
from hydraulis.errors import require
from hydraulis.integrations.cp_groups import CPGroups, plan_cp_groups
from hydraulis.integrations.cp_ranks import CPRanks, cp_ranks
from hydraulis.types import SchemeSpace

log = logging.getLogger(__name__)


class SizedGroup(Protocol):
    """What is used of ``dp_cp_group`` (a ``torch.distributed.ProcessGroup``)."""

    def size(self) -> int: ...


class HydraulisCPScheduler:
    """``BalancedCPScheduler``'s contract, Hydraulis' plan (module docstring)."""

    def __init__(self, max_seq_len_per_rank: int, dp_cp_group: SizedGroup, *, space: SchemeSpace | str | Path,
                 tp: int) -> None:
        space = space if isinstance(space, SchemeSpace) else read_scheme_space(space)
        self.ranks: CPRanks = cp_ranks(space, tp, int(dp_cp_group.size()), max_seq_len_per_rank)
        self.max_seq_len_per_rank = max_seq_len_per_rank
        log.info("hybrid CP over %d ranks, tp %d: options %s", self.ranks.ranks, tp,
                 [(o.cp, o.capacity) for o in self.ranks.options])

    def get_groups_and_subsamples(self, sample_id_seqlens: list[tuple[int, int]],
                                  config: Any = None) -> tuple[list[list[list[int]]], list[list[list[int]]]]:
        """``(groups, sample_id_groups)``: ``groups[g][r]`` the lengths, ``sample_id_groups[g][r]``
        the sample ids rank ``r`` runs in group ``g``; ``config`` is accepted and unused."""
        require(len(sample_id_seqlens) > 0, "sample_id_seqlens", [], "is empty: give at least one sample")
        ids = [int(i) for i, _ in sample_id_seqlens]
        require(len(set(ids)) == len(ids), "sample_id_seqlens", ids, "repeats a sample id")
        lengths = np.array([int(s) for _, s in sample_id_seqlens], dtype=np.int64)
        plan: CPGroups = plan_cp_groups(self.ranks, lengths)
        sample_id_groups = [[[ids[i] for i in rank] for rank in group] for group in plan.groups]
        groups = [[[int(lengths[i]) for i in rank] for rank in group] for group in plan.groups]
        return groups, sample_id_groups

"""``HydraulisCPScheduler``: Megatron-Core's hybrid context-parallel scheduler, planned by
Hydraulis (docs/integrations.md).

A drop-in for ``megatron.core.pipeline_parallel.hybrid_cp_schedule.BalancedCPScheduler``
(megatron-core 0.16): the same constructor and ``get_groups_and_subsamples(sample_id_seqlens,
config) -> (groups, sample_id_groups)``, planned by
:func:`~hydraulis.integrations.cp_plan.plan_cp_groups` (several groups per step). Optional:
``space`` (a scheme space or its path; default: analytic, of the model ``config`` describes on
the GPU this runs on, every power-of-two CP size), ``tp`` (default: Megatron's parallel state,
else ``config.tensor_model_parallel_size``), ``device`` (a preset name; default: this GPU),
``never_worse`` (also plan with Megatron's own scheduler and keep the cheaper plan on the cost
model, when each of its samples fits its CP size: never worse, planned in the sum of both times).
:func:`install` replaces Megatron's class where its wrapper looks it up.

Nothing here imports Megatron or torch before a default is needed: the group is asked its ``size()``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from hydraulis import __version__
from hydraulis.artifacts.record import timestamp
from hydraulis.artifacts.scheme_space import read_scheme_space
from hydraulis.base.errors import HydraulisError, require
from hydraulis.base.presets import device_preset
from hydraulis.base.specs import Cluster
from hydraulis.base.types import DeviceSpec, SchemeSpace
from hydraulis.integrations.cp_groups import CPGroups, cp_step_ms
from hydraulis.integrations.cp_plan import plan_cp_groups
from hydraulis.integrations.cp_ranks import CPRanks, cp_ranks
from hydraulis.integrations.model_description import (
    description_of,
    device_matching,
    model_from_description,
)
from hydraulis.profiler.analytic import analytic_scheme_space

log = logging.getLogger(__name__)

_REPLACED: dict[str, type] = {}
"""Megatron's ``BalancedCPScheduler`` as :func:`install` found it (for ``never_worse``)."""


class SizedGroup(Protocol):
    """What is used of ``dp_cp_group`` (a ``torch.distributed.ProcessGroup``)."""

    def size(self) -> int: ...


class HydraulisCPScheduler:
    """``BalancedCPScheduler``'s contract, Hydraulis' plan (module docstring)."""

    def __init__(self, max_seq_len_per_rank: int, dp_cp_group: SizedGroup, *,
                 space: SchemeSpace | str | Path | None = None, tp: int | None = None,
                 device: str | DeviceSpec | None = None, never_worse: bool = False) -> None:
        self.max_seq_len_per_rank = max_seq_len_per_rank
        self.size = int(dp_cp_group.size())
        self.never_worse = never_worse
        self._group = dp_cp_group
        self._tp, self._device = tp, device
        self._ranks: CPRanks | None = None
        if space is not None:
            space = space if isinstance(space, SchemeSpace) else read_scheme_space(space)
            self._ranks = self._options(space, self._tensor_parallel(None, space))

    @property
    def ranks(self) -> CPRanks:
        """The CP options planned with (derived at the first step when no space was given)."""
        require(self._ranks is not None, "space", None, "is derived from the first step's config: plan a step first")
        return self._ranks

    def get_groups_and_subsamples(self, sample_id_seqlens: list[tuple[int, int]],
                                  config: Any = None) -> tuple[list[list[list[int]]], list[list[list[int]]]]:
        """``(groups, sample_id_groups)``: ``groups[g][r]`` the lengths, ``sample_id_groups[g][r]``
        the sample ids rank ``r`` runs in group ``g``; ``config`` (Megatron's ``TransformerConfig``)
        describes the model when no space was given."""
        require(len(sample_id_seqlens) > 0, "sample_id_seqlens", [], "is empty: give at least one sample")
        if self._ranks is None:
            self._ranks = self._derive(config)
        ids = [int(i) for i, _ in sample_id_seqlens]
        require(len(set(ids)) == len(ids), "sample_id_seqlens", ids, "repeats a sample id")
        seqlens = [int(s) for _, s in sample_id_seqlens]
        lengths = np.array(seqlens, dtype=np.int64)
        plan: CPGroups = plan_cp_groups(self._ranks, lengths)
        if self.never_worse:
            plan = self._cheaper_than_megatron(plan, sample_id_seqlens, lengths, config)
        sample_id_groups = [[[ids[i] for i in rank] for rank in group] for group in plan.groups]
        groups = [[[seqlens[i] for i in rank] for rank in group] for group in plan.groups]
        return groups, sample_id_groups

    def _cheaper_than_megatron(self, plan: CPGroups, sample_id_seqlens: list[tuple[int, int]], lengths: np.ndarray,
                               config: Any) -> CPGroups:
        """``plan`` or Megatron's own for the same samples, whichever the cost model prices lower;
        Megatron's only when each sample's CP size is an option holding it."""
        scheduler = megatron_scheduler()(max_seq_len_per_rank=self.max_seq_len_per_rank, dp_cp_group=self._group)
        _, found = scheduler.get_groups_and_subsamples(list(sample_id_seqlens), config)
        position = {int(i): p for p, (i, _) in enumerate(sample_id_seqlens)}
        theirs = CPGroups(tuple(tuple(tuple(position[int(i)] for i in rank) for rank in group) for group in found))
        capacity = {o.cp: o.capacity for o in self.ranks.options}
        for g in range(len(theirs.groups)):
            for i, holders in theirs.holders(g).items():
                if capacity.get(len(holders), 0) < lengths[i]:
                    log.info("Megatron's plan runs a %d-token sample on %d ranks, which do not hold it: ours kept",
                             lengths[i], len(holders))
                    return plan
        return theirs if cp_step_ms(theirs, lengths, self.ranks) < cp_step_ms(plan, lengths, self.ranks) else plan

    def _derive(self, config: Any) -> CPRanks:
        require(config is not None, "config", None, "is needed to derive the space: pass space= or Megatron's config")
        tp = self._tensor_parallel(config, None)
        model = model_from_description(description_of(config), "megatron", "config")
        device = self._gpu()
        cps = tuple(2 ** i for i in range(self.size.bit_length()) if self.size % 2 ** i == 0)
        cluster = Cluster(self.size * tp, min(device.devices_per_node, self.size * tp), device.name)
        space = analytic_scheme_space(model, device, cluster, cps, (tp,), (1,), created=timestamp(),
                                      tool_version=__version__, command="HydraulisCPScheduler")
        return self._options(space, tp)

    def _options(self, space: SchemeSpace, tp: int) -> CPRanks:
        ranks = cp_ranks(space, tp, self.size, self.max_seq_len_per_rank)
        log.info("hybrid CP over %d ranks, tp %d: options %s", ranks.ranks, tp,
                 [(o.cp, o.capacity) for o in ranks.options])
        return ranks

    def _tensor_parallel(self, config: Any, space: SchemeSpace | None) -> int:
        """``tp``: given, else Megatron's parallel state, else the config's, else the space's only one."""
        if self._tp is not None:
            return self._tp
        found = _megatron_tp()
        if found is None and config is not None:
            found = getattr(config, "tensor_model_parallel_size", None)
        if found is None and space is not None:
            tps = sorted({p.scheme.tp for p in space.profiles if p.scheme.pp == 1})
            found = tps[0] if len(tps) == 1 else None
        require(found is not None, "tp", None, "is unknown: pass tp= (Megatron's parallel state is not initialised)")
        return int(found)

    def _gpu(self) -> DeviceSpec:
        if isinstance(self._device, DeviceSpec):
            return self._device
        if self._device is not None:
            return device_preset(self._device)
        import torch

        require(torch.cuda.is_available(), "device", None, "is unknown without a GPU: pass device= a preset name")
        index = torch.cuda.current_device()
        return device_matching(torch.cuda.get_device_name(index), torch.cuda.get_device_properties(index).total_memory)


def install() -> None:
    """Make Megatron-Core build ``HydraulisCPScheduler`` wherever it builds ``BalancedCPScheduler``
    (its schedule module and the data wrapper, which imported the name)."""
    from megatron.core.datasets import data_schedule
    from megatron.core.pipeline_parallel import hybrid_cp_schedule

    if hybrid_cp_schedule.BalancedCPScheduler is not HydraulisCPScheduler:
        _REPLACED["BalancedCPScheduler"] = hybrid_cp_schedule.BalancedCPScheduler
    hybrid_cp_schedule.BalancedCPScheduler = HydraulisCPScheduler
    data_schedule.BalancedCPScheduler = HydraulisCPScheduler


def megatron_scheduler() -> type:
    """Megatron-Core's own ``BalancedCPScheduler``: as :func:`install` found it, else wherever
    Megatron still names it (its schedule module, its data wrapper's import)."""
    from megatron.core.datasets import data_schedule
    from megatron.core.pipeline_parallel import hybrid_cp_schedule

    named = (_REPLACED.get("BalancedCPScheduler"), hybrid_cp_schedule.BalancedCPScheduler,
             data_schedule.BalancedCPScheduler)
    found = next((c for c in named if c is not None and c is not HydraulisCPScheduler), None)
    require(found is not None, "never_worse", True,
            "needs Megatron's own BalancedCPScheduler, which was replaced everywhere before install() could keep it")
    return found


def _megatron_tp() -> int | None:
    try:
        from megatron.core import parallel_state
    except ImportError:
        return None
    try:
        if parallel_state.model_parallel_is_initialized():
            return int(parallel_state.get_tensor_model_parallel_world_size())
    except (AssertionError, RuntimeError, HydraulisError):
        return None
    return None

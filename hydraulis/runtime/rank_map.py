"""Rank map: which pipeline, stage, cp rank and tp rank each process runs under a strategy.

Pipelines take blocks of ranks at the aligned offsets of :func:`hydraulis.placement.pipeline_offsets`
(largest first, contiguous: a pipeline of ``2^k`` ranks starts at a multiple of ``2^k``, so the
planner's communicator count is the runtime's); inside a pipeline of scheme ``(cp, tp, pp)``
starting at rank ``r₀`` the tensor-parallel rank varies fastest, then the context-parallel rank,
then the stage (Megatron-LM's order, so a tp group stays inside a node)::

    rank = r₀ + (stage·cp + cp_rank)·tp + tp_rank

Worked example, ``1,2,1+1,1,2`` on 4 ranks: pipeline 0 is ranks 0–1 (tp ranks 0, 1 of its one
stage), pipeline 1 is ranks 2 (stage 0) and 3 (stage 1); ``1,1,1+1,2,1`` puts the two-rank
pipeline first, on ranks 0–1, and the one-rank pipeline on rank 2. A strategy may use fewer devices than
the world: the remaining ranks are idle for that step (no place) but still take part in the
gradient reduction.

Group rank sets: a **pipeline** (all its ranks), a **stage** (the ``cp·tp`` ranks of one
stage), a **tp group** (one stage, one cp rank) and a **cp group** (one stage, one tp rank).
:class:`ProcessGroups` finds the torch process groups the runtime communicates over — tp and
cp groups of more than one rank — in a :class:`GroupCache` keyed by the set of ranks: a group
is created (``torch.distributed.new_group``, a collective call on every rank, in the same order
everywhere — every rank sees the same strategies in the same order, so the caches agree) the
first time its rank set is needed, by any strategy, and reused from then on. Returning to a
strategy, or a new strategy whose tp and cp groups sit on rank sets seen before, creates no
communicator; at 1,024 devices with a few strategies the cache holds at most the distinct rank
sets of those strategies, whatever their placement. Pipelines talk point-to-point between
neighbouring stages on the world group, and gradients are reduced over the world, so no
collective runs over pipeline or stage sets and no group is created for them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any

from hydraulis.errors import require
from hydraulis.placement import pipeline_offsets
from hydraulis.runtime.layout import PipelineLayout
from hydraulis.runtime.parallel.group import ParallelGroup


class GroupKind(str, Enum):
    PIPELINE = "pipeline"
    STAGE = "stage"
    TP = "tp"
    CP = "cp"


@dataclass(frozen=True)
class RankPlace:
    """Where one rank sits in a strategy."""

    pipeline: int
    stage: int
    cp_rank: int
    tp_rank: int


@dataclass(frozen=True)
class RankMap:
    """Ranks of a world of ``world_size`` processes laid out for ``pipelines``."""

    pipelines: tuple[PipelineLayout, ...]
    world_size: int

    def __post_init__(self) -> None:
        devices = sum(p.scheme.devices for p in self.pipelines)
        require(devices <= self.world_size, "strategy", f"{devices} devices",
                f"needs more processes than the {self.world_size} running")

    def first_rank(self, pipeline: int) -> int:
        return self.offsets[pipeline]

    @property
    def offsets(self) -> tuple[int, ...]:
        """The first rank of every pipeline (:func:`hydraulis.placement.pipeline_offsets`)."""
        return pipeline_offsets([p.scheme.devices for p in self.pipelines])

    def rank(self, place: RankPlace) -> int:
        scheme = self.pipelines[place.pipeline].scheme
        return self.first_rank(place.pipeline) + (place.stage * scheme.cp + place.cp_rank) * scheme.tp + place.tp_rank

    def place(self, rank: int) -> RankPlace | None:
        """The place of ``rank``, or None when the strategy leaves it idle."""
        for index, (layout, start) in enumerate(zip(self.pipelines, self.offsets)):
            scheme = layout.scheme
            if start <= rank < start + scheme.devices:
                stage, within = divmod(rank - start, scheme.cp * scheme.tp)
                cp_rank, tp_rank = divmod(within, scheme.tp)
                return RankPlace(index, stage, cp_rank, tp_rank)
        return None

    def pipeline_ranks(self, pipeline: int) -> tuple[int, ...]:
        start = self.first_rank(pipeline)
        return tuple(range(start, start + self.pipelines[pipeline].scheme.devices))

    def stage_ranks(self, pipeline: int, stage: int) -> tuple[int, ...]:
        scheme = self.pipelines[pipeline].scheme
        return tuple(self.rank(RankPlace(pipeline, stage, c, t)) for c in range(scheme.cp) for t in range(scheme.tp))

    def tp_ranks(self, pipeline: int, stage: int, cp_rank: int) -> tuple[int, ...]:
        scheme = self.pipelines[pipeline].scheme
        return tuple(self.rank(RankPlace(pipeline, stage, cp_rank, t)) for t in range(scheme.tp))

    def cp_ranks(self, pipeline: int, stage: int, tp_rank: int) -> tuple[int, ...]:
        scheme = self.pipelines[pipeline].scheme
        return tuple(self.rank(RankPlace(pipeline, stage, c, tp_rank)) for c in range(scheme.cp))

    def group_rank_sets(self) -> Iterator[tuple[GroupKind, tuple[int, ...]]]:
        """Every group of every kind, in one fixed order (pipeline by pipeline)."""
        for p, layout in enumerate(self.pipelines):
            scheme = layout.scheme
            yield GroupKind.PIPELINE, self.pipeline_ranks(p)
            for stage in range(scheme.pp):
                yield GroupKind.STAGE, self.stage_ranks(p, stage)
                for c in range(scheme.cp):
                    yield GroupKind.TP, self.tp_ranks(p, stage, c)
                for t in range(scheme.tp):
                    yield GroupKind.CP, self.cp_ranks(p, stage, t)

    def neighbour(self, place: RankPlace, offset: int) -> int | None:
        """The rank of the same cp/tp position ``offset`` stages away, or None past an end."""
        stage = place.stage + offset
        if not 0 <= stage < self.pipelines[place.pipeline].scheme.pp:
            return None
        return self.rank(RankPlace(place.pipeline, stage, place.cp_rank, place.tp_rank))


class GroupCache:
    """Process groups by rank set (module docstring); ``new_group(ranks)`` creates one (None:
    a single process, which needs none). ``created`` counts the groups created so far."""

    def __init__(self, new_group: Callable[[list[int]], Any] | None) -> None:
        self.new_group = new_group
        self.groups: dict[tuple[int, ...], Any] = {}
        self.created = 0

    def group(self, ranks: tuple[int, ...]) -> Any:
        if ranks not in self.groups:
            self.groups[ranks] = self.new_group(list(ranks))
            self.created += 1
        return self.groups[ranks]


@dataclass(frozen=True)
class ProcessGroups:
    """This rank's tp and cp groups under one rank map (trivial groups when of size 1)."""

    tp: ParallelGroup
    cp: ParallelGroup

    @classmethod
    def create(cls, rank_map: RankMap, rank: int, cache: GroupCache) -> ProcessGroups:
        """Every tp and cp group of more than one rank from ``cache``, in
        :meth:`RankMap.group_rank_sets` order, on every rank (the ones new to the cache are
        created, collectively)."""
        mine = {GroupKind.TP: ParallelGroup.single(), GroupKind.CP: ParallelGroup.single()}
        for kind, ranks in rank_map.group_rank_sets():
            if kind not in mine or len(ranks) == 1:
                continue
            group = cache.group(ranks)
            if rank in ranks:
                mine[kind] = ParallelGroup(group, len(ranks), ranks.index(rank))
        return cls(tp=mine[GroupKind.TP], cp=mine[GroupKind.CP])

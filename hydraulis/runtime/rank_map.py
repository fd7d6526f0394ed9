"""Rank map: which pipeline, stage, cp rank and tp rank each process runs under a strategy.

Pipelines take blocks of ranks at the aligned offsets of :func:`hydraulis.base.placement.pipeline_offsets`
(largest first, contiguous: a pipeline of ``2^k`` ranks starts at a multiple of ``2^k``, so the
planner's communicator count is the runtime's); inside a pipeline starting at rank ``r₀`` the
stages take consecutive blocks, stage ``σ`` one of ``cp·tp_σ`` ranks, and inside a stage the
tensor-parallel rank varies fastest, then the context-parallel rank (Megatron-LM's order, so a
tp group stays inside a node)::

    rank = r₀ + cp·Σ_{σ'<σ} tp_σ' + cp_rank·tp_σ + tp_rank

The details: :class:`RankMap`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from functools import cached_property
from typing import Any

from hydraulis.base.errors import require
from hydraulis.base.placement import (
    RankRange,
    cp_set,
    pipeline_offsets,
    stage_offsets,
    stage_rank,
    stage_starts,
    tp_set,
)
from hydraulis.base.stages import hand_off_peers
from hydraulis.runtime.parallel.group import ParallelGroup
from hydraulis.sharding.pipeline import PipelineSplit, pipelines_spec


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
class HandOff:
    """Whom one rank exchanges hidden states with (:class:`RankMap`): ``previous`` is the rank of
    the previous stage it receives its input from and ``to_previous`` the ranks there it sends
    the input's gradient to (None and empty on the first stage); ``following`` the rank of the
    next stage it receives its output's gradient from and ``to_following`` the ranks there it
    sends its output to (None and empty on the last stage)."""

    previous: int | None
    to_previous: tuple[int, ...]
    following: int | None
    to_following: tuple[int, ...]


@dataclass(frozen=True)
class RankMap:
    """Ranks of a world of ``world_size`` processes laid out for ``pipelines``; with ``groups``
    (a mixed cluster's rank ranges, :meth:`~hydraulis.base.cluster.ClusterDescription.rank_ranges`)
    every stage's block is allocated inside its device group's ranges
    (:func:`hydraulis.base.placement.stage_offsets`).

    ``tp_σ`` is the stage's own degree (:meth:`~hydraulis.base.scheme.Scheme.stage_tp`): every stage's
    ``tp`` for an ordinary scheme, where this is ``r₀ + (σ·cp + cp_rank)·tp + tp_rank``; a staged
    scheme's (design §9.2) may differ per stage.

    Worked examples, ``1,2,1+1,1,2`` on 4 ranks: pipeline 0 is ranks 0–1 (tp ranks 0, 1 of its one
    stage), pipeline 1 is ranks 2 (stage 0) and 3 (stage 1); ``1,1,1+1,2,1`` puts the two-rank
    pipeline first, on ranks 0–1, and the one-rank pipeline on rank 2. ``1|2:3>1:1+1,1,1`` on 4
    ranks: the staged pipeline (3 devices) is ranks 0–2 — stage 0 (tp 2) ranks 0, 1, stage 1 (tp 1)
    rank 2 — and the plain one rank 3; ``2|1:2>2:2`` (cp 2) has stage 0 on ranks 0 (cp rank 0) and
    1 (cp rank 1), stage 1 on ranks 2, 3 (cp rank 0, tp ranks 0, 1) and 4, 5 (cp rank 1). A strategy
    may use fewer devices than the world: the remaining ranks are idle for that step (no place) but
    still take part in the gradient reduction.

    **On a mixed cluster** (``groups``: each device group's rank range) a stage's block of
    ``cp·tp_σ`` ranks lies inside its group's range (:func:`hydraulis.base.placement.stage_offsets`), so a
    pipeline's stages need not be adjacent: ``1|8:16@a100>8:24@h100x2`` with ``a100`` = ranks 0–15
    and ``h100`` = 16–31 puts stage 0 of the pipelines on ranks 0–7 and 8–15 and stage 1 on 16–23
    and 24–31. Inside a stage the order above holds; hand-offs and groups follow the stage blocks.

    **Hand-off between stages** (:class:`HandOff`). Without sequence parallelism a stage's output
    is replicated over its tp ranks (the row-parallel all-reduce), and after its backward the
    gradient of its input is complete on every tp rank (the all-reduce of the column-parallel
    entry's backward); cp is uniform within a pipeline, so cp rank ``c`` only talks to cp rank ``c``. A rank
    of tp rank ``x`` in a stage of ``a`` tp ranks therefore takes what it needs from the neighbour
    stage (``b`` tp ranks, same cp rank) from its rank ``x mod b`` and gives what it has to the
    neighbour's ranks ``y ≡ x (mod a)``, ``y < b`` — the same rule both ways, so every ``y`` takes
    from exactly the ``x`` that gives to it: forward, receiver ``j`` of stage ``σ+1`` gets the
    activation from sender ``j mod tp_σ``; backward, sender ``i`` of stage ``σ`` gets the gradient
    from receiver ``i mod tp_{σ+1}``. Equal degrees pair tp rank ``x`` with ``x``. Worked example,
    ``1|2:3>1:1`` (stage 0 ranks 0, 1; stage 1 rank 2): rank 0 sends its output to rank 2 and
    rank 1 to no one; rank 2 receives from rank 0 and sends the input gradient to ranks 0 and 1,
    each of which receives it from rank 2. A ``1|1:2>4:2`` hand-off fans out: rank 0 sends to all
    four ranks of stage 1 and receives the gradient from the first of them. Every rank of a stage
    posts its sends and receives in the stage's 1F1B order (:mod:`.parallel.pipeline`), so the pair
    of ranks at either end of a message post it at the same place in their sequences.

    Group rank sets: a **pipeline** (all its ranks), a **stage** (the ``cp·tp_σ`` ranks of one
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

    pipelines: tuple[PipelineSplit, ...]
    world_size: int
    groups: tuple[RankRange, ...] = ()

    def __post_init__(self) -> None:
        devices = sum(p.scheme.devices for p in self.pipelines)
        require(devices <= self.world_size, "strategy", f"{devices} devices",
                f"needs more processes than the {self.world_size} running")
        if self.groups:
            cluster = sum(group.size for group in self.groups)
            require(cluster == self.world_size, "world_size", self.world_size,
                    f"must be the cluster's {cluster} devices")

    @cached_property
    def stage_starts(self) -> tuple[tuple[int, ...], ...]:
        """The first rank of every stage of every pipeline: :func:`~hydraulis.base.placement.stage_starts`
        at the pipeline's offset without groups, :func:`~hydraulis.base.placement.stage_offsets` with them."""
        schemes = [p.scheme for p in self.pipelines]
        if self.groups:
            return stage_offsets(schemes, self.groups, pipelines_spec(self.pipelines))
        return tuple(stage_starts(scheme, offset)
                     for scheme, offset in zip(schemes, pipeline_offsets([s.devices for s in schemes])))

    @cached_property
    def _places(self) -> dict[int, RankPlace]:
        places = {}
        for pipeline, layout in enumerate(self.pipelines):
            for stage in range(layout.scheme.pp):
                for cp_rank in range(layout.scheme.cp):
                    for tp_rank in range(layout.scheme.stage_tp(stage)):
                        place = RankPlace(pipeline, stage, cp_rank, tp_rank)
                        places[self.rank(place)] = place
        return places

    @property
    def offsets(self) -> tuple[int, ...]:
        """The first rank of every pipeline (:func:`hydraulis.base.placement.pipeline_offsets` without groups)."""
        return tuple(starts[0] for starts in self.stage_starts)

    def stage_start(self, pipeline: int, stage: int) -> int:
        return self.stage_starts[pipeline][stage]

    def rank(self, place: RankPlace) -> int:
        tp = self.pipelines[place.pipeline].scheme.stage_tp(place.stage)
        return stage_rank(self.stage_start(place.pipeline, place.stage), tp, place.cp_rank, place.tp_rank)

    def place(self, rank: int) -> RankPlace | None:
        """The place of ``rank``, or None when the strategy leaves it idle."""
        return self._places.get(rank)

    def pipeline_ranks(self, pipeline: int) -> tuple[int, ...]:
        """The ranks of every stage of ``pipeline``, stage by stage."""
        return tuple(r for stage in range(self.pipelines[pipeline].scheme.pp) for r in self.stage_ranks(pipeline, stage))

    def stage_ranks(self, pipeline: int, stage: int) -> tuple[int, ...]:
        start = self.stage_start(pipeline, stage)
        scheme = self.pipelines[pipeline].scheme
        return tuple(range(start, start + scheme.cp * scheme.stage_tp(stage)))

    def tp_ranks(self, pipeline: int, stage: int, cp_rank: int) -> tuple[int, ...]:
        return tp_set(self.stage_start(pipeline, stage), self.pipelines[pipeline].scheme.stage_tp(stage), cp_rank)

    def cp_ranks(self, pipeline: int, stage: int, tp_rank: int) -> tuple[int, ...]:
        scheme = self.pipelines[pipeline].scheme
        return cp_set(self.stage_start(pipeline, stage), scheme.stage_tp(stage), scheme.cp, tp_rank)

    def group_rank_sets(self) -> Iterator[tuple[GroupKind, tuple[int, ...]]]:
        """Every group of every kind, in one fixed order (pipeline by pipeline)."""
        for p, layout in enumerate(self.pipelines):
            scheme = layout.scheme
            yield GroupKind.PIPELINE, self.pipeline_ranks(p)
            for stage in range(scheme.pp):
                yield GroupKind.STAGE, self.stage_ranks(p, stage)
                for c in range(scheme.cp):
                    yield GroupKind.TP, self.tp_ranks(p, stage, c)
                for t in range(scheme.stage_tp(stage)):
                    yield GroupKind.CP, self.cp_ranks(p, stage, t)

    def hand_off(self, place: RankPlace) -> HandOff:
        """The ranks ``place`` exchanges hidden states and their gradients with (:class:`RankMap`)."""
        scheme = self.pipelines[place.pipeline].scheme
        tp = scheme.stage_tp(place.stage)

        def side(stage: int) -> tuple[int | None, tuple[int, ...]]:
            if not 0 <= stage < scheme.pp:
                return None, ()
            takes, gives = hand_off_peers(place.tp_rank, tp, scheme.stage_tp(stage))
            ranks = self.tp_ranks(place.pipeline, stage, place.cp_rank)
            return ranks[takes], tuple(ranks[t] for t in gives)

        return HandOff(*side(place.stage - 1), *side(place.stage + 1))


class GroupCache:
    """Process groups by rank set (:class:`RankMap`); ``new_group(ranks)`` creates one (None:
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

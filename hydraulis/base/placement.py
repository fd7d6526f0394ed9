"""Where a strategy's pipelines sit on the devices, and the communicators they need.

**Aligned placement** (:func:`pipeline_offsets`). Pipelines are placed largest first, each
right after the one before (ties keep the strategy's order). When every pipeline has ``2^k``
devices this is buddy placement: the offset of pipeline ``j`` is ``Σ_{i<j} D_i`` and every
earlier ``D_i ≥ D_j`` is a multiple of ``D_j``, so

    offset_j ≡ 0 (mod D_j)

The details: :func:`communicators`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache

import numpy as np

from hydraulis.base.errors import HydraulisError
from hydraulis.base.stages import hand_off_peers
from hydraulis.base.types import Scheme


class CommunicatorKind(str, Enum):
    """A collective group (``new_group`` over a rank set) or a point-to-point pair."""

    GROUP = "group"
    PAIR = "pair"


@dataclass(frozen=True, order=True)
class Communicator:
    """One communicator: its kind and its ranks (ascending)."""

    kind: CommunicatorKind
    ranks: tuple[int, ...]


def pipeline_offsets(sizes: Sequence[int]) -> tuple[int, ...]:
    """First device of every pipeline of ``sizes`` devices (in the given order): largest
    first, contiguous, ties in the given order (:func:`communicators`)."""
    order = sorted(range(len(sizes)), key=lambda i: -sizes[i])
    offsets = [0] * len(sizes)
    start = 0
    for i in order:
        offsets[i] = start
        start += sizes[i]
    return tuple(offsets)


@dataclass(frozen=True)
class RankRange:
    """The ranks ``[start, start + size)`` of device group ``name``."""

    name: str
    start: int
    size: int


def stage_offsets(schemes: Sequence[Scheme], groups: Sequence[RankRange],
                  strategy: str = "") -> tuple[tuple[int, ...], ...]:
    """The first rank of every stage of every pipeline of ``schemes`` on a world partitioned into
    ``groups`` (:func:`communicators`, "Placement on a mixed cluster"): one tuple per pipeline.
    ``strategy`` is the SPEC an error names (default: the schemes joined by ``+``)."""
    runs = _group_runs(schemes, groups)
    starts = [[0] * scheme.pp for scheme in schemes]
    for index, group in enumerate(groups):
        mine = [run for run in runs if run.group == index]
        needed = sum(run.size for run in mine)
        if needed > group.size:
            raise HydraulisError("strategy", strategy or "+".join(str(s) for s in schemes),
                                 f"needs {needed} devices of group {group.name}, which has {group.size}")
        for run, offset in zip(mine, pipeline_offsets([run.size for run in mine])):
            start = group.start + offset
            for stage in run.stages:
                starts[run.pipeline][stage] = start
                start += _stage_size(schemes[run.pipeline], stage)
    return tuple(tuple(pipeline) for pipeline in starts)


@dataclass
class _GroupRun:
    pipeline: int
    group: int
    stages: list[int]
    size: int


def _group_runs(schemes: Sequence[Scheme], groups: Sequence[RankRange]) -> list[_GroupRun]:
    """Every pipeline's runs of consecutive stages in one group, pipeline by pipeline."""
    names = [group.name for group in groups]
    runs: list[_GroupRun] = []
    for p, scheme in enumerate(schemes):
        for stage in range(scheme.pp):
            name = scheme.stages[stage].group if scheme.is_staged else ""
            if name and name not in names:
                raise HydraulisError("group", name, f"is not a device group of the cluster ({', '.join(names)})")
            group = names.index(name) if name else 0
            if runs and runs[-1].pipeline == p and runs[-1].group == group:
                runs[-1].stages.append(stage)
                runs[-1].size += _stage_size(scheme, stage)
            else:
                runs.append(_GroupRun(p, group, [stage], _stage_size(scheme, stage)))
    return runs


def _stage_size(scheme: Scheme, stage: int) -> int:
    return scheme.cp * scheme.stage_tp(stage)


def placement_problem(sizes: Sequence[int], devices: int, devices_per_node: int) -> str:
    """Why pipelines of ``sizes`` devices cannot sit at :func:`pipeline_offsets` on ``devices``
    devices in nodes of ``devices_per_node`` ("" when they can): they must fit, and each must
    lie inside one node or take whole nodes."""
    if sum(sizes) > devices:
        return f"{sum(sizes)} devices needed, {devices} there are"
    node = devices_per_node
    for size, offset in zip(sizes, pipeline_offsets(sizes)):
        inside = offset // node == (offset + size - 1) // node
        if not (inside or (offset % node == 0 and size % node == 0)):
            return f"a pipeline of {size} devices at device {offset} straddles nodes of {node}"
    return ""


def communicators(schemes: Sequence[Scheme]) -> frozenset[Communicator]:
    """The communicators of pipelines running ``schemes`` (one entry per pipeline, in
    :meth:`~hydraulis.base.strategy.Strategy.expanded` order) under aligned placement.

    — a pipeline of ``D ≤ n`` devices (``n`` per node, a power of two) lies inside one node, one of
    ``D ≥ n`` devices takes ``D/n`` whole nodes, and within a node the pipelines sit in aligned
    halves, quarters, … of it. Other sizes are placed the same way, contiguously, without the
    alignment guarantee. The runtime's rank map (:mod:`hydraulis.runtime.rank_map`) calls
    :func:`pipeline_offsets`, so planning and training agree on where every pipeline runs.

    **Communicators** (:func:`communicators`). Inside a pipeline of scheme ``(cp, tp, pp)`` at
    offset ``o`` the rank of stage ``s``, cp rank ``c`` and tp rank ``t`` is
    ``o + (s·cp + c)·tp + t`` (:mod:`hydraulis.runtime.rank_map`). The runtime needs

    * a **group** per tensor-parallel set ``{o + (s·cp + c)·tp + t : t}`` and per context-parallel
      set ``{o + (s·cp + c)·tp + t : c}`` of more than one rank (``new_group``, cached by rank set);
    * a **pair** per pipeline hand-off ``(r, r + cp·tp)`` between neighbouring stages (NCCL makes a
      communicator per point-to-point pair on first use); between stages of different tp (a staged
      scheme, design §9.2) the pairs of :func:`hydraulis.base.stages.hand_off_peers`, e.g. ``1|2:2>1:2``:
      (0, 2) and (1, 2). The bound counts a staged scheme's universe by enumerating its aligned
      offsets.

    Each distinct rank set is created once in a run; a strategy's *new* communicators are those
    no earlier step (nor the proposal's strategies, warmed before step 0) has created, and each
    costs the space's ``communicator_ms`` on the step that first needs it
    (:mod:`hydraulis.dispatch.synthesis`).

    **The bound** (:func:`communicator_bound`). With aligned offsets (``o`` a multiple of
    ``D = cp·tp·pp``, ``o + D ≤ N``) every tp set is an aligned block of ``tp`` ranks, every cp
    set is ``tp``-strided inside an aligned block of ``cp·tp`` ranks, and every pair has its lower
    rank ``r`` with ``r mod (δ·pp) < δ·(pp − 1)``, ``δ = cp·tp``. So whatever strategies a run
    uses — any counts of the schemes ``K`` — its communicators lie in the finite *aligned universe*

        U(K, N) = ⋃_{k∈K} ⋃_{o ≡ 0 (mod D_k), o + D_k ≤ N} communicators of k at o

    and the run creates at most ``|U(K, N)| ≤ Σ_{tp} N/tp + Σ_{(cp,tp)} N/cp + Σ_δ N`` of them over
    any number of steps (sums over the distinct tp > 1, (cp > 1, tp) and δ with some pp > 1 in
    ``K``) — a bound in ``N`` and the scheme set alone, where unaligned placement could create new
    rank sets on every step. :func:`communicator_bound` counts ``|U|`` exactly.

    Worked example: ``1×(1,4,1) + 2×(1,2,1)`` on 8 devices: offsets (0, 4, 6); groups {0,1,2,3},
    {4,5}, {6,7}, no pairs. ``1×(1,2,2) + 2×(1,1,2)``: offsets (0, 4, 6); the (1,2,2) pipeline has
    tp groups {0,1}, {2,3} and pairs (0,2), (1,3); the others pairs (4,5), (6,7).

    **Placement on a mixed cluster** (:func:`stage_offsets`, design §9.2). A launcher numbers a
    mixed cluster's ranks group by group: device group ``g`` owns the ranks
    ``[start_g, start_g + size_g)`` (:class:`RankRange`, in the cluster description's group order,
    :meth:`hydraulis.base.cluster.ClusterDescription.rank_ranges`). Each stage ``σ`` of a pipeline belongs to a group — its
    ``@GROUP``, else the first group (every stage of an ordinary pipeline, and a staged stage
    without a group). A pipeline's consecutive stages of one group form a **group run** of
    ``cp·Σ tp_σ`` ranks; inside each group the group runs are placed as pipelines are above —
    largest first, contiguous from ``start_g``, ties in pipeline order — and a group run's stages take
    consecutive blocks. So a one-group cluster places exactly as :func:`pipeline_offsets` does, and
    a group run of ``2^k`` ranks sits at ``start_g + m·2^k`` (aligned when groups are whole nodes of a
    power of two). Every rank is used at most once; a group whose group runs need more ranks than it
    owns is refused, naming the strategy and the group. Worked example, ``1|8:16@a100>8:24@h100x2``
    on ``a100`` = ranks 0–15, ``h100`` = ranks 16–31: stage 0 of the two pipelines on ranks 0–7 and
    8–15, stage 1 on ranks 16–23 and 24–31.
    """
    offsets = pipeline_offsets([s.devices for s in schemes])
    return frozenset().union(*(scheme_communicators(scheme, offset) for scheme, offset in zip(schemes, offsets)))


@lru_cache(maxsize=4096)
def scheme_communicators(scheme: Scheme, offset: int) -> frozenset[Communicator]:
    """The tp and cp groups of more than one rank and the stage-to-stage pairs of one
    pipeline of ``scheme`` starting at ``offset`` (cached: a run places the same schemes at
    the same aligned offsets step after step, at most ``N/D`` offsets per scheme)."""
    return frozenset(_scheme_communicators(scheme, offset))


def _scheme_communicators(scheme: Scheme, offset: int) -> Iterable[Communicator]:
    cp, starts = scheme.cp, stage_starts(scheme, offset)
    for stage, base in enumerate(starts):
        tp = scheme.stage_tp(stage)
        if tp > 1:
            for c in range(cp):
                yield Communicator(CommunicatorKind.GROUP, tp_set(base, tp, c))
        if cp > 1:
            for t in range(tp):
                yield Communicator(CommunicatorKind.GROUP, cp_set(base, tp, cp, t))
        if stage + 1 < len(starts):
            for pair in sorted(_hand_off_pairs(base, tp, starts[stage + 1], scheme.stage_tp(stage + 1), cp)):
                yield Communicator(CommunicatorKind.PAIR, pair)


def stage_starts(scheme: Scheme, offset: int) -> tuple[int, ...]:
    """The first rank of each stage of a pipeline at ``offset``: blocks of ``cp·tp_σ`` ranks one
    after the other, ``o + cp·Σ_{σ'<σ} tp_σ'``. E.g. ``1|2:2>1:2`` at 4: (4, 6)."""
    starts, base = [], offset
    for stage in range(scheme.pp):
        starts.append(base)
        base += scheme.cp * scheme.stage_tp(stage)
    return tuple(starts)


def stage_rank(start: int, tp: int, cp_rank: int, tp_rank: int) -> int:
    """The rank of cp rank ``c`` and tp rank ``t`` in a stage of ``tp`` ranks per cp rank whose
    block starts at ``start``: ``start + c·tp + t`` (cp-major, tp-minor)."""
    return start + cp_rank * tp + tp_rank


def tp_set(start: int, tp: int, cp_rank: int) -> tuple[int, ...]:
    """The tensor-parallel set of cp rank ``c``: ``{start + c·tp + t : t}``, an aligned block."""
    first = stage_rank(start, tp, cp_rank, 0)
    return tuple(range(first, first + tp))


def cp_set(start: int, tp: int, cp: int, tp_rank: int) -> tuple[int, ...]:
    """The context-parallel set of tp rank ``t``: ``{start + c·tp + t : c}``, ``tp``-strided."""
    return tuple(range(stage_rank(start, tp, 0, tp_rank), start + cp * tp, tp))


def _hand_off_pairs(base: int, tp: int, following: int, other: int, cp: int) -> set[tuple[int, int]]:
    """The rank pairs between a stage of ``tp`` ranks per cp rank at ``base`` and the next one
    of ``other`` at ``following`` (:func:`hydraulis.base.stages.hand_off_peers`, both directions;
    equal degrees pair ``r`` with ``r + cp·tp``)."""
    pairs = set()
    for c in range(cp):
        for x in range(tp):
            takes, gives = hand_off_peers(x, tp, other)
            pairs.add((stage_rank(base, tp, c, x), stage_rank(following, other, c, takes)))
            pairs.update((stage_rank(base, tp, c, x), stage_rank(following, other, c, y)) for y in gives)
    return pairs


def communicator_bound(schemes: Iterable[Scheme], devices: int) -> int:
    """``|U(K, N)|`` of :func:`communicators`: the most distinct communicators any run using
    pipelines of ``schemes`` on ``devices`` devices can create under aligned placement."""
    groups: set[tuple[int, ...]] = set()
    pairs: dict[int, np.ndarray] = {}
    for scheme in set(schemes):
        size, width = scheme.devices, scheme.cp * scheme.tp
        for offset in range(0, devices - size + 1, size):
            if scheme.stages:
                for communicator in _scheme_communicators(scheme, offset):
                    if communicator.kind is CommunicatorKind.GROUP:
                        groups.add(communicator.ranks)
                    else:
                        low, high = communicator.ranks
                        pairs.setdefault(high - low, np.zeros(devices, dtype=bool))[low] = True
                continue
            for stage in range(scheme.pp):
                base = offset + stage * width
                if scheme.tp > 1:
                    groups.update(tuple(range(base + c * scheme.tp, base + (c + 1) * scheme.tp))
                                  for c in range(scheme.cp))
                if scheme.cp > 1:
                    groups.update(tuple(range(base + t, base + width, scheme.tp)) for t in range(scheme.tp))
            if scheme.pp > 1:
                lower = pairs.setdefault(width, np.zeros(devices, dtype=bool))
                lower[offset:offset + size - width] = True
    return len(groups) + int(sum(int(lower.sum()) for lower in pairs.values()))

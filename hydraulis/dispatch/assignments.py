"""A step plan as per-rank assignments: what every rank of the world runs, for any runtime
(design §8.3).

Pipeline ``p`` of scheme ``(cp, tp, pp)`` starts at the aligned offset ``o_p`` of
:func:`~hydraulis.base.placement.pipeline_offsets` (largest first, contiguous), its stage ``σ`` at
``o_p + cp·Σ_{σ'<σ} tp_σ'`` (:func:`~hydraulis.base.placement.stage_starts`), and inside a stage

    rank = stage_start + cp_rank·tp_σ + tp_rank          (:func:`~hydraulis.base.placement.stage_rank`)

— the runtime's rank map (the runtime's ``rank_map``) without a cluster's groups. Every
rank of pipeline ``p`` (each stage, cp rank and tp rank) runs the pipeline's micro-batches, in
order: stage ``σ`` its layers of them, the ``cp`` ranks of a stage each a ``1/cp`` share of
every sequence, the ``tp`` ranks each a tensor shard. Ranks a strategy leaves idle are listed
nowhere; they only take part in the gradient reduction.

Worked example: ``1×(1,2,1) + 1×(1,1,2)`` on 4 devices, lengths ``(9, 3, 4)``, pipeline 0
running micro-batch ``(0,)`` and pipeline 1 ``(2, 1)``: ranks 0 and 1 are pipeline 0's tp
ranks 0 and 1 with micro-batches ``[[0]]``; rank 2 is pipeline 1's stage 0, rank 3 its stage 1,
both with ``[[2, 1]]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hydraulis.base.errors import require, require_int
from hydraulis.base.placement import pipeline_offsets, stage_rank, stage_starts
from hydraulis.base.scheme import Scheme
from hydraulis.base.step_plan import StepPlan

MicroBatchIndices = tuple[tuple[int, ...], ...]
"""``micro_batches[j]``: the sequence indices of micro-batch ``j``, in running order."""


@dataclass(frozen=True)
class RankAssignment:
    """Rank ``rank`` runs stage ``stage`` of pipeline ``pipeline`` as its cp rank ``cp_rank`` and
    tp rank ``tp_rank``, over ``micro_batches`` (indices into the step's lengths)."""

    rank: int
    pipeline: int
    stage: int
    cp_rank: int
    tp_rank: int
    micro_batches: MicroBatchIndices

    def __post_init__(self) -> None:
        for name in ("rank", "pipeline", "stage", "cp_rank", "tp_rank"):
            require_int(getattr(self, name), name, minimum=0)


@dataclass(frozen=True)
class StepAssignments:
    """One step on ``devices`` ranks: ``lengths[i]`` the tokens of sequence ``i`` as planned (its
    given length, or the limit it was truncated to), ``schemes[p]`` pipeline ``p``'s scheme and
    ``ranks`` every placed rank, ascending. Construction checks the module docstring's layout and
    that every sequence runs exactly once in exactly one pipeline; errors name the path
    (``ranks[3].micro_batches[0][2]``)."""

    devices: int
    lengths: tuple[int, ...]
    schemes: tuple[Scheme, ...]
    ranks: tuple[RankAssignment, ...]

    def __post_init__(self) -> None:
        require_int(self.devices, "devices", minimum=1)
        require(len(self.lengths) > 0, "lengths", [], "must hold at least one sequence")
        for i, length in enumerate(self.lengths):
            require_int(length, f"lengths[{i}]", minimum=1)
        require(len(self.schemes) > 0, "schemes", [], "must hold at least one pipeline")
        placed = sum(s.devices for s in self.schemes)
        require(placed <= self.devices, "schemes", f"{placed} devices", f"need more than the {self.devices} there are")
        require(len(self.ranks) == placed, "ranks", len(self.ranks), f"must list the {placed} placed ranks")
        starts = _stage_starts(self.schemes)
        first: dict[int, MicroBatchIndices] = {}
        for i, rank in enumerate(self.ranks):
            _check_place(rank, i, self.schemes, starts)
            require(i == 0 or rank.rank > self.ranks[i - 1].rank, f"ranks[{i}].rank", rank.rank,
                    f"must exceed ranks[{i - 1}].rank (ascending, each once)")
            _check_indices(rank.micro_batches, i, len(self.lengths))
            expected = first.setdefault(rank.pipeline, rank.micro_batches)
            require(rank.micro_batches == expected, f"ranks[{i}].micro_batches", rank.micro_batches,
                    f"must be pipeline {rank.pipeline}'s, as every rank of it runs: {expected}")
        owner: dict[int, int] = {}
        for pipeline, micro_batches in first.items():
            for sequence in (s for mb in micro_batches for s in mb):
                require(sequence not in owner, "sequence", sequence,
                        f"runs twice (pipelines {owner.get(sequence)} and {pipeline}): each runs exactly once")
                owner[sequence] = pipeline
        missing = [i for i in range(len(self.lengths)) if i not in owner]
        require(not missing, "lengths", missing, "are sequences no pipeline runs")


def step_assignments(plan: StepPlan, lengths: Sequence[int], devices: int) -> StepAssignments:
    """The assignments of ``plan`` for the step of ``lengths`` (as given) on ``devices`` ranks:
    every rank of a pipeline gets its micro-batches' sequence indices. A plan that cut sequences
    into pieces (``OversizePolicy.SPLIT``) lists an index twice and is refused."""
    every = plan.pipelines.micro_batches
    require(np.unique(every.sequences).size == every.sequences.size, "oversize", "split",
            "cut sequences into pieces; the assignments list whole sequences: plan with error or truncate")
    planned = np.array([int(s) for s in lengths], dtype=np.int64)
    np.minimum.at(planned, every.sequences, every.lengths)
    schemes = tuple(p.scheme for p in plan.pipelines)
    ranks = []
    for pipeline, (scheme, starts) in enumerate(zip(schemes, _stage_starts(schemes))):
        micro_batches = tuple(mb.sequences for mb in plan.pipelines[pipeline].micro_batches)
        for stage, start in enumerate(starts):
            tp = scheme.stage_tp(stage)
            ranks.extend(RankAssignment(stage_rank(start, tp, c, t), pipeline, stage, c, t, micro_batches)
                         for c in range(scheme.cp) for t in range(tp))
    return StepAssignments(devices, tuple(planned.tolist()), schemes, tuple(sorted(ranks, key=lambda r: r.rank)))


def _stage_starts(schemes: Sequence[Scheme]) -> tuple[tuple[int, ...], ...]:
    offsets = pipeline_offsets([s.devices for s in schemes])
    return tuple(stage_starts(scheme, offset) for scheme, offset in zip(schemes, offsets))


def _check_place(rank: RankAssignment, i: int, schemes: Sequence[Scheme], starts: Sequence[Sequence[int]]) -> None:
    where = f"ranks[{i}]"
    require(rank.pipeline < len(schemes), f"{where}.pipeline", rank.pipeline,
            f"must be below the {len(schemes)} pipelines")
    scheme = schemes[rank.pipeline]
    require(rank.stage < scheme.pp, f"{where}.stage", rank.stage, f"must be below pp = {scheme.pp}")
    require(rank.cp_rank < scheme.cp, f"{where}.cp_rank", rank.cp_rank, f"must be below cp = {scheme.cp}")
    tp = scheme.stage_tp(rank.stage)
    require(rank.tp_rank < tp, f"{where}.tp_rank", rank.tp_rank, f"must be below the stage's tp = {tp}")
    placed = stage_rank(starts[rank.pipeline][rank.stage], tp, rank.cp_rank, rank.tp_rank)
    require(rank.rank == placed, f"{where}.rank", rank.rank,
            f"must be {placed}, where the rank map places pipeline {rank.pipeline} stage {rank.stage} "
            f"cp rank {rank.cp_rank} tp rank {rank.tp_rank}")


def _check_indices(micro_batches: MicroBatchIndices, i: int, count: int) -> None:
    for j, mb in enumerate(micro_batches):
        require(len(mb) > 0, f"ranks[{i}].micro_batches[{j}]", [], "must hold at least one sequence")
        for k, sequence in enumerate(mb):
            require_int(sequence, f"ranks[{i}].micro_batches[{j}][{k}]", minimum=0, maximum=count - 1)

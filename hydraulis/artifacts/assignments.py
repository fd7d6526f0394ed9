"""The step-assignments artifact: one step's micro-batches per rank, for any runtime (design §8.3).

Layout (``schema_version`` 1)::

    {"schema_version": 1, "kind": "step_assignments", "devices", "lengths": [...],
     "pipelines": [{"scheme": {"cp", "tp", "pp", ...}}],
     "ranks": [{"rank", "pipeline", "stage", "cp_rank", "tp_rank", "cp", "tp", "pp",
                "micro_batches": [[sequence index, ...], ...]}]}

``lengths[i]`` is sequence ``i``'s tokens as planned; ``micro_batches`` list indices into it;
``cp``, ``tp`` (the stage's degree) and ``pp`` repeat the rank's pipeline scheme for a reader
that looks at one rank only, and are checked against it on load. Loading checks every field and
the layout (:class:`~hydraulis.dispatch.assignments.StepAssignments`); an error names the path,
e.g. ``ranks[3].micro_batches[0][2]``.
"""

from __future__ import annotations

from pathlib import Path

from hydraulis.artifacts.record import Record, build, check_header, read_json, write_json
from hydraulis.artifacts.scheme_space import scheme_from_record, scheme_to_dict
from hydraulis.dispatch.assignments import RankAssignment, StepAssignments
from hydraulis.errors import HydraulisError
from hydraulis.scheme import Scheme

KIND = "step_assignments"
SCHEMA_VERSION = 1


def assignments_to_dict(assignments: StepAssignments) -> dict:
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND,
        "devices": assignments.devices,
        "lengths": list(assignments.lengths),
        "pipelines": [{"scheme": scheme_to_dict(scheme)} for scheme in assignments.schemes],
        "ranks": [_rank_to_dict(rank, assignments.schemes[rank.pipeline]) for rank in assignments.ranks],
    }


def assignments_from_dict(document: object) -> StepAssignments:
    record = Record(document)
    check_header(record, KIND, (SCHEMA_VERSION,))
    schemes = tuple(scheme_from_record(r.sub("scheme")) for r in record.records("pipelines"))
    return build("", StepAssignments, devices=record.int("devices"), lengths=record.ints("lengths"),
                 schemes=schemes, ranks=tuple(_rank_from_record(r, schemes) for r in record.records("ranks")))


def read_assignments(path: str | Path) -> StepAssignments:
    return assignments_from_dict(read_json(path))


def write_assignments(path: str | Path, assignments: StepAssignments) -> None:
    write_json(path, assignments_to_dict(assignments))


def _rank_to_dict(rank: RankAssignment, scheme: Scheme) -> dict:
    return {"rank": rank.rank, "pipeline": rank.pipeline, "stage": rank.stage, "cp_rank": rank.cp_rank,
            "tp_rank": rank.tp_rank, "cp": scheme.cp, "tp": scheme.stage_tp(rank.stage), "pp": scheme.pp,
            "micro_batches": [list(mb) for mb in rank.micro_batches]}


def _rank_from_record(record: Record, schemes: tuple[Scheme, ...]) -> RankAssignment:
    rank = build(record.path, RankAssignment, rank=record.int("rank"), pipeline=record.int("pipeline"),
                 stage=record.int("stage"), cp_rank=record.int("cp_rank"), tp_rank=record.int("tp_rank"),
                 micro_batches=record.int_lists("micro_batches"))
    if rank.pipeline < len(schemes) and rank.stage < schemes[rank.pipeline].pp:
        scheme = schemes[rank.pipeline]
        for key, derived in (("cp", scheme.cp), ("tp", scheme.stage_tp(rank.stage)), ("pp", scheme.pp)):
            given = record.int(key)
            if given != derived:
                raise HydraulisError(f"{record.path}.{key}", given,
                                     f"disagrees with pipeline {rank.pipeline}'s scheme {scheme} ({derived})")
    return rank

"""The step-assignments artifact: one step's micro-batches per rank, for any runtime (design §8.3).

Layout (``schema_version`` 2; JSON Schema: ``hydraulis/resources/step_assignments.schema.json``)::

    {"schema_version": 2, "kind": "step_assignments", "step", "devices",
     "strategy": {"index": k | null, "name": "4×(1,8,1)"}, "predicted_ms",
     "samples": [{"id", "length"}, ...],
     "pipelines": [{"scheme": {"cp", "tp", "pp", ...}, "predicted_ms", "stages": [{"layers": [first, end]}]}],
     "ranks": [{"rank", "pipeline", "stage", "cp_rank", "tp_rank", "cp", "tp", "pp", "layers",
                "predicted_ms", "micro_batches": [[sample id, ...], ...]}]}

``samples`` are the step's as planned (a length truncated under ``oversize truncate``);
``micro_batches`` list the user's ids; a rank's ``cp``, ``tp``, ``pp``, ``layers`` and
``predicted_ms`` repeat its pipeline's (and stage's) for a reader that looks at one rank only, and
are checked against them on load. ``strategy.index`` is the proposal's strategy, ``null`` when the
step's strategy was synthesised. Several steps are written as JSON Lines, one document a line.
Loading checks every field and the layout; an error names the path, e.g. ``ranks[3].micro_batches[0][2]``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from hydraulis.artifacts.record import (
    Record,
    build,
    check_header,
    read_json,
    write_json,
)
from hydraulis.artifacts.scheme_space import scheme_from_record, scheme_to_dict
from hydraulis.base.errors import HydraulisError, require
from hydraulis.base.files import atomic_path
from hydraulis.base.scheme import Scheme
from hydraulis.dispatch.assigned_steps import AssignedStep, SampleId
from hydraulis.dispatch.assignments import RankAssignment, StepAssignments

KIND = "step_assignments"
SCHEMA_VERSION = 2
SCHEMA_FILE = "step_assignments.schema.json"


def assignments_schema() -> dict:
    """The JSON Schema shipped with the package (``hydraulis/resources/``)."""
    return json.loads(resources.files("hydraulis.resources").joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))


def assignments_to_dict(step: AssignedStep) -> dict:
    a = step.assignments
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND,
        "step": step.step,
        "devices": a.devices,
        "strategy": {"index": step.strategy_index, "name": step.strategy},
        "predicted_ms": step.predicted_ms,
        "samples": [{"id": i, "length": s} for i, s in zip(step.ids, a.lengths)],
        "pipelines": [{"scheme": scheme_to_dict(scheme), "predicted_ms": ms,
                       "stages": [{"layers": list(layers)} for layers in stages]}
                      for scheme, ms, stages in zip(a.schemes, step.pipeline_ms, step.stage_layers)],
        "ranks": [_rank_to_dict(rank, step) for rank in a.ranks],
    }


def assignments_from_dict(document: object) -> AssignedStep:
    record = Record(document)
    check_header(record, KIND, (SCHEMA_VERSION,))
    samples = record.records("samples")
    ids = tuple(_sample_id(s) for s in samples)
    index = {sample: i for i, sample in enumerate(ids)}
    require(len(index) == len(ids), "samples", len(ids), "repeat an id")
    pipelines = record.records("pipelines")
    schemes = tuple(scheme_from_record(p.sub("scheme")) for p in pipelines)
    pipeline_ms = tuple(p.float("predicted_ms") for p in pipelines)
    layers = tuple(tuple(tuple(s.ints("layers")) for s in p.records("stages")) for p in pipelines)
    ranks = tuple(_rank_from_record(r, schemes, pipeline_ms, layers, index) for r in record.records("ranks"))
    assignments = build("", StepAssignments, devices=record.int("devices"),
                        lengths=tuple(s.int("length") for s in samples), schemes=schemes, ranks=ranks)
    strategy = record.sub("strategy")
    chosen = strategy.raw("index")
    return build("", AssignedStep, step=record.int("step"), ids=ids, assignments=assignments,
                 strategy_index=None if chosen is None else strategy.int("index"), strategy=strategy.str("name"),
                 predicted_ms=record.float("predicted_ms"), pipeline_ms=pipeline_ms, stage_layers=layers)


def read_assignments(path: str | Path) -> AssignedStep:
    return assignments_from_dict(read_json(path))


def write_assignments(path: str | Path, step: AssignedStep) -> None:
    write_json(path, assignments_to_dict(step))


def assignments_lines(steps: Sequence[AssignedStep]) -> str:
    """JSON Lines: one compact document per step."""
    return "".join(json.dumps(assignments_to_dict(s), ensure_ascii=False) + "\n" for s in steps)


def write_assignments_lines(path: str | Path, steps: Sequence[AssignedStep]) -> None:
    with atomic_path(Path(path)) as temporary:
        temporary.write_text(assignments_lines(steps), encoding="utf-8")


def read_assignments_lines(path: str | Path) -> tuple[AssignedStep, ...]:
    """Every line's step; an error names the line."""
    found = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            found.append(assignments_from_dict(json.loads(line)))
        except (json.JSONDecodeError, HydraulisError) as error:
            raise HydraulisError(f"{Path(path).name}:{number}", line[:40], f"is not a step's assignments ({error})") \
                from None
    return tuple(found)


def _sample_id(record: Record) -> SampleId:
    sample = record.raw("id")
    require(isinstance(sample, (str, int)) and not isinstance(sample, bool), f"{record.path}.id", sample,
            "must be a string or an integer")
    return sample


def _rank_to_dict(rank: RankAssignment, step: AssignedStep) -> dict:
    scheme = step.assignments.schemes[rank.pipeline]
    return {"rank": rank.rank, "pipeline": rank.pipeline, "stage": rank.stage, "cp_rank": rank.cp_rank,
            "tp_rank": rank.tp_rank, "cp": scheme.cp, "tp": scheme.stage_tp(rank.stage), "pp": scheme.pp,
            "layers": list(step.stage_layers[rank.pipeline][rank.stage]),
            "predicted_ms": step.pipeline_ms[rank.pipeline],
            "micro_batches": [[step.ids[i] for i in mb] for mb in rank.micro_batches]}


def _rank_from_record(record: Record, schemes: tuple[Scheme, ...], pipeline_ms: tuple[float, ...],
                      layers: tuple[tuple[tuple[int, ...], ...], ...], index: dict[SampleId, int]) -> RankAssignment:
    micro_batches = []
    given = record.raw("micro_batches")
    require(isinstance(given, list), f"{record.path}.micro_batches", given, "must be a list of micro-batches")
    for j, mb in enumerate(given):
        require(isinstance(mb, list), f"{record.path}.micro_batches[{j}]", mb, "must be a list of sample ids")
        for k, sample in enumerate(mb):
            require(not isinstance(sample, bool) and sample in index, f"{record.path}.micro_batches[{j}][{k}]",
                    sample, "is not a sample id of this step")
        micro_batches.append(tuple(index[sample] for sample in mb))
    rank = build(record.path, RankAssignment, rank=record.int("rank"), pipeline=record.int("pipeline"),
                 stage=record.int("stage"), cp_rank=record.int("cp_rank"), tp_rank=record.int("tp_rank"),
                 micro_batches=tuple(micro_batches))
    if rank.pipeline < len(schemes) and rank.stage < schemes[rank.pipeline].pp:
        scheme = schemes[rank.pipeline]
        stage_layers = list(layers[rank.pipeline][rank.stage]) if rank.stage < len(layers[rank.pipeline]) else None
        for key, derived, given in (("cp", scheme.cp, record.int("cp")), ("tp", scheme.stage_tp(rank.stage),
                                    record.int("tp")), ("pp", scheme.pp, record.int("pp")),
                                    ("layers", stage_layers, list(record.ints("layers"))),
                                    ("predicted_ms", pipeline_ms[rank.pipeline], record.float("predicted_ms"))):
            if given != derived:
                raise HydraulisError(f"{record.path}.{key}", given,
                                     f"disagrees with pipeline {rank.pipeline}'s scheme {scheme} ({derived})")
    return rank

"""The training-log artifact: every step's record and the run's summary (``hydraulis train
--output-dir``).

Layout (``schema_version`` 1)::

    {"schema_version": 1, "kind": "train_log",
     "summary": {"steps", "tokens", "seconds", "tokens_per_s", "prediction_error",
                 "warm_prediction_error" (null: no step after a strategy's first), "first_loss",
                 "last_loss", "strategies": [[SPEC, steps], ...], "synthesised", "communicators",
                 "communicator_bound"},
     "steps": [{"step", "strategy", "tokens", "loss", "measured_ms": [...], "predicted_ms": [...],
                "propagate_ms", "reduce_ms", "step_ms", "predicted_step_ms", "planning_ms",
                "wait_ms", "strategy_index", "synthesised"}]}

``synthesised`` (a step that ran a strategy made for it) is optional on load (absent: false).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from hydraulis.artifacts.record import Record, build, check_header, read_json, write_json
from hydraulis.runtime.records import StepRecord, summarize

KIND = "train_log"
SCHEMA_VERSION = 1
_TIMES = ("propagate_ms", "reduce_ms", "step_ms", "predicted_step_ms", "planning_ms", "wait_ms")


def train_log_to_dict(records: tuple[StepRecord, ...]) -> dict:
    summary = asdict(summarize(records))
    summary["strategies"] = [list(pair) for pair in summary["strategies"]]
    return {"schema_version": SCHEMA_VERSION, "kind": KIND, "summary": summary,
            "steps": [{**asdict(r), "measured_ms": list(r.measured_ms), "predicted_ms": list(r.predicted_ms)}
                      for r in records]}


def train_log_from_dict(document: object) -> tuple[StepRecord, ...]:
    record = Record(document)
    check_header(record, KIND, (SCHEMA_VERSION,))
    return tuple(_step(r) for r in record.records("steps"))


def read_train_log(path: str | Path) -> tuple[StepRecord, ...]:
    return train_log_from_dict(read_json(path))


def write_train_log(path: str | Path, records: tuple[StepRecord, ...]) -> None:
    write_json(path, train_log_to_dict(records))


def _step(record: Record) -> StepRecord:
    return build(record.path, StepRecord, step=record.int("step"), strategy=record.str("strategy"),
                 tokens=record.int("tokens"), loss=record.float("loss"), strategy_index=record.int("strategy_index", 0),
                 measured_ms=tuple(_floats(record, "measured_ms")), predicted_ms=tuple(_floats(record, "predicted_ms")),
                 synthesised=record.bool("synthesised", False), **{key: record.float(key) for key in _TIMES})


def _floats(record: Record, key: str) -> list[float]:
    return [Record({"v": v}, f"{record.path}.{key}[{i}]").float("v") for i, v in enumerate(record.raw(key))]

"""The profiler's measurement cache: one JSON line per finished point, appended as it finishes.

The details: :class:`MeasurementCache`."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict
from pathlib import Path

from hydraulis.artifacts.record import Record, check_header
from hydraulis.base.errors import HydraulisError
from hydraulis.profiler.measurement import Measurement, MeasureSettings, MeasureStatus, ReductionMeasurement
from hydraulis.profiler.sweep import Statistic, SweepPoint

log = logging.getLogger(__name__)

KIND = "profile_measurement"
REDUCTION_KIND = "profile_reduction"
SCHEMA_VERSION = 1
FILE_NAME = "measurements.jsonl"


def point_key(point: SweepPoint, settings: MeasureSettings) -> str:
    """The canonical text of ``point``'s key (sorted JSON)."""
    shape = {k: v for k, v in asdict(settings.model).items() if k != "layers"}
    options = {"options": list(point.scheme.options)} if point.scheme.options else {}
    stage = {} if point.stage is None else {"stage": point.stage, "stage_layers": list(point.stage_layers)}
    statistic = {} if settings.statistic is Statistic.MEDIAN else {"statistic": settings.statistic.value}
    key = {"model": shape, "scheme": [point.scheme.cp, point.scheme.tp, point.scheme.pp], **options, **stage,
           "depth": point.depth, "lengths": list(point.lengths), **statistic, **_settings_key(settings)}
    return json.dumps(key, sort_keys=True)


def reduction_key(devices: int, settings: MeasureSettings) -> str:
    """The canonical text of the key of the reduction on ``devices`` ranks (sorted JSON)."""
    key = {"model": asdict(settings.model), "reduction_devices": devices, **_settings_key(settings)}
    return json.dumps(key, sort_keys=True)


def _settings_key(settings: MeasureSettings) -> dict:
    env = settings.environment
    return {"repeats": settings.repeats, "warmup": settings.warmup, "device_kind": env.device_kind,
            "device": env.device_name, "torch": env.torch_version, "precision": env.precision,
            "threads": env.threads, "clock": env.clock.value, "fill_node": env.fill_node}


class MeasurementCache:
    """The lines of ``folder/measurements.jsonl``, keyed by :func:`point_key`.

    A killed sweep keeps every line it completed; rerunning the same command reads them back and
    measures only the rest. A line is the point's **key** — everything that changes its result:
    the model's shape (not its layer count: the stage depth is part of the key), scheme, depth,
    lengths, the statistic of its samples, repeats, warm-up runs, device, torch version, precision,
    threads, clock and whether the node was filled with replicas — and its result::

        {"schema_version": 1, "kind": "profile_measurement",
         "key": {"model": {...}, "scheme": [cp, tp, pp], "options": [...], "stage", "stage_layers": [...],
                 "depth", "lengths": [...], "statistic", "repeats", "warmup", "device_kind", "device", "torch", "precision",
                 "threads", "clock", "fill_node"},
         "status": "ok" | "out_of_memory", "time_ms", "forward_ms", "activation_bytes",
         "samples_ms": [...], "wall_s", "handoff_ms"}

    The reduction (:class:`~hydraulis.profiler.measurement.ReductionMeasurement`) is one more line,
    its key the same settings with the whole model (its layer count sets the parameters moved) and
    the number of devices instead of a point::

        {"schema_version": 1, "kind": "profile_reduction",
         "key": {"model": {...}, "reduction_devices", "repeats", "warmup", "device_kind", ...},
         "time_ms", "propagate_ms", "reduce_ms", "samples_ms": [...], "communicator_ms", "overlap"}

    ``options`` (the scheme's non-default options, e.g. ``["sp", "recompute=full"]``) is left out
    for a scheme without any, ``stage``, ``stage_layers`` for a point that runs a whole
    pipeline, and ``statistic`` (:class:`~hydraulis.profiler.sweep.Statistic`, default
    ``min``) when it is ``median``, so lines written before options, stage points and the choice of
    statistic existed keep their keys (they hold the median of the repeats); ``communicator_ms``
    and ``overlap`` (``ω``; absent in older reduction lines: not measured, the space takes the
    device preset's); ``wall_s``
    (absent in older lines: 0) is the point's share of the wall time spent measuring it;
    ``handoff_ms`` (the pipeline hand-off ``d`` of a whole pipeline of ``pp > 1`` on the wall clock,
    :mod:`hydraulis.profiler.handoff`) is absent for other points and in older lines. A last line cut short by a kill is skipped with a warning; a line that parses but is not a
    measurement is an error naming the line.
    """

    def __init__(self, folder: str | Path) -> None:
        self.path = Path(folder) / FILE_NAME
        self.entries: dict[str, dict] = {}
        if self.path.is_file():
            self._load()

    def find(self, point: SweepPoint, settings: MeasureSettings) -> Measurement | None:
        entry = self.entries.get(point_key(point, settings))
        return None if entry is None else _measurement(point, entry)

    def find_reduction(self, devices: int, settings: MeasureSettings) -> ReductionMeasurement | None:
        entry = self.entries.get(reduction_key(devices, settings))
        return None if entry is None else _reduction(devices, entry)

    def append(self, measurement: Measurement, settings: MeasureSettings) -> None:
        """Add one line and flush it to disk (one ``write`` of a whole line)."""
        self._write(KIND, point_key(measurement.point, settings),
                    {"status": measurement.status.value, "time_ms": measurement.time_ms,
                     "forward_ms": measurement.forward_ms, "activation_bytes": measurement.activation_bytes,
                     "samples_ms": list(measurement.samples_ms), "wall_s": measurement.wall_s,
                     **({} if measurement.handoff_ms is None else {"handoff_ms": measurement.handoff_ms})})

    def append_reduction(self, measurement: ReductionMeasurement, settings: MeasureSettings) -> None:
        optional = {name: getattr(measurement, name) for name in ("communicator_ms", "overlap")
                    if getattr(measurement, name) is not None}
        self._write(REDUCTION_KIND, reduction_key(measurement.devices, settings),
                    {"time_ms": measurement.time_ms, "propagate_ms": measurement.propagate_ms,
                     "reduce_ms": measurement.reduce_ms, "samples_ms": list(measurement.samples_ms), **optional})

    def _write(self, kind: str, key: str, result: dict) -> None:
        line = {"schema_version": SCHEMA_VERSION, "kind": kind, "key": json.loads(key), **result}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(line) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        self.entries[key] = line

    def _load(self) -> None:
        lines = self.path.read_text(encoding="utf-8").splitlines()
        for number, text in enumerate(lines, start=1):
            if not text.strip():
                continue
            try:
                document = json.loads(text)
            except json.JSONDecodeError:
                if number == len(lines):
                    log.warning("%s: line %d is cut short (a killed sweep); measuring it again", self.path, number)
                    continue
                raise HydraulisError(f"{self.path}:{number}", text[:60], "is not a JSON line") from None
            record = Record(document, f"{self.path.name}:{number}")
            check_header(record, REDUCTION_KIND if record.raw("kind", None) == REDUCTION_KIND else KIND,
                         (SCHEMA_VERSION,))
            self.entries[json.dumps(record.sub("key").data, sort_keys=True)] = document


def _samples(record: Record) -> tuple[float, ...]:
    return tuple(Record({"v": v}, "samples_ms").float("v") for v in record.raw("samples_ms", []))


def _reduction(devices: int, entry: dict) -> ReductionMeasurement:
    record = Record(entry)
    communicator, overlap = (record.float(name) if record.raw(name, None) is not None else None
                             for name in ("communicator_ms", "overlap"))
    return ReductionMeasurement(devices, record.float("time_ms"), record.float("propagate_ms"),
                                record.float("reduce_ms"), _samples(record), communicator, overlap)


def _measurement(point: SweepPoint, entry: dict) -> Measurement:
    record = Record(entry)
    status = record.str("status")
    try:
        kind = MeasureStatus(status)
    except ValueError:
        raise HydraulisError("status", status, f"must be one of {[s.value for s in MeasureStatus]}") from None
    return Measurement(point, kind, time_ms=record.float("time_ms"), forward_ms=record.float("forward_ms"),
                       activation_bytes=record.float("activation_bytes"), samples_ms=_samples(record),
                       wall_s=record.float("wall_s", 0.0),
                       handoff_ms=record.float("handoff_ms") if record.raw("handoff_ms", None) is not None else None)

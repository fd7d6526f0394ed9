"""What one measured point gave, and the environment it was measured in (no torch here).

A point's **time** is the median over repeats of the slowest rank's forward + backward time per
micro-batch (the slowest rank sets the pace of a pipeline stage); its **activation bytes** the
peak activation memory of the most loaded rank with the micro-batches 1F1B keeps in flight
(:mod:`hydraulis.profiler.measure` says how each device measures it). A point that ran out of
memory is a capacity limit of the scheme, not a failure of the profile.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from hydraulis.profiler.sweep import SweepPoint
from hydraulis.types import ModelSpec


class Clock(str, Enum):
    """What a point's time is measured with (:mod:`hydraulis.profiler.device` says when each)."""

    WALL = "wall"
    """Elapsed time (after synchronising the GPU): what a dedicated device takes."""
    CPU = "cpu"
    """Each rank's busy time, the CPU time of its process (compute thread and communication
    threads), which excludes the time spent waiting for a core on an oversubscribed or shared
    CPU — and also the idle waits for peers."""


class MeasureStatus(str, Enum):
    OK = "ok"
    OUT_OF_MEMORY = "out_of_memory"


@dataclass(frozen=True)
class Environment:
    """Where and how points are measured: device kind and name, torch, precision, threads and
    clock are part of every cache key, so a point measured otherwise is measured again. ``devices`` is the
    number of local devices (processes) a scheme may use, ``memory_bytes`` one device's memory
    (0: not known, e.g. a CPU process)."""

    device_kind: str
    device_name: str
    torch_version: str
    precision: str
    threads: int
    devices: int
    memory_bytes: int = 0
    clock: Clock = Clock.WALL

    @property
    def description(self) -> str:
        return f"{self.device_name} ({self.device_kind}, {self.devices} local devices)"

    @property
    def software(self) -> str:
        backend = "nccl" if self.device_kind == "cuda" else "gloo"
        return (f"torch {self.torch_version}, {backend}, {self.precision}, {self.threads} threads per process, "
                f"{self.clock.value} clock")


@dataclass(frozen=True)
class Measurement:
    """One point's result; ``samples_ms`` holds every repeat's slowest-rank time."""

    point: SweepPoint
    status: MeasureStatus
    time_ms: float = 0.0
    forward_ms: float = 0.0
    activation_bytes: float = 0.0
    samples_ms: tuple[float, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status is MeasureStatus.OK


@dataclass(frozen=True)
class MeasureSettings:
    """What, besides the point, a measurement depends on."""

    model: ModelSpec
    environment: Environment
    repeats: int
    warmup: int


@dataclass(frozen=True)
class MeasureJob:
    """The points one job measures in order, how, the cache folder it appends them to, and the
    progress so far (``done`` of ``total`` points)."""

    points: tuple[SweepPoint, ...]
    settings: MeasureSettings
    cache: str
    done: int
    total: int
    seed: int = 0

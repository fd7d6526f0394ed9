"""What one measured point gave, and the environment it was measured in (no torch here).

A point's **samples** are its timed micro-batches' forward + backward times, each the slowest
rank's (the slowest rank sets the pace of a pipeline stage — of every replica of the scheme when
the node is filled, :attr:`Environment.fill_node`); its **time** is their minimum by default
(:class:`~hydraulis.profiler.sweep.Statistic`: other work on the machine only ever adds time to
a sample); its **activation bytes** the peak
activation memory of the most loaded rank with the micro-batches 1F1B keeps in flight
(the runtime's ``profiling.measure`` says how each device measures it). A point that ran out of
memory is a capacity limit of the scheme, not a failure of the profile.

A **reduction** measurement is what a training step costs beyond its pipelines' compute — the
cost model's ``T_reduce`` (:mod:`hydraulis.cost.step`): the runtime's propagation of the weights
to the compute layout, the reduction of the gradients into the optimizer layout and the
optimizer's update (the runtime's ``profiling.reduction``) — and, measured in the same job, what
creating one more communicator costs a strategy switch (design §5) and how much of an exchange
runs under compute (``ω``, design §5).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from hydraulis.base.types import ModelSpec, Scheme
from hydraulis.profiler.sweep import Interleave, Statistic, SweepPoint


class Clock(str, Enum):
    """What a point's time is measured with (the runtime's ``profiling.device`` says when each)."""

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
    """Where and how points are measured: device kind and name, torch, precision, threads, clock
    and ``fill_node`` are part of every cache key, so a point measured otherwise is measured
    again. ``devices`` is the number of local devices (processes) a scheme may use,
    ``memory_bytes`` one device's memory (0: not known, e.g. a CPU process). With ``fill_node``
    every point runs on :meth:`replicas` copies of its scheme at once, the node as loaded as by a
    training step that fills it (the runtime's ``profiling.device`` says why)."""

    device_kind: str
    device_name: str
    torch_version: str
    precision: str
    threads: int
    devices: int
    memory_bytes: int = 0
    clock: Clock = Clock.WALL
    fill_node: bool = False

    def replicas(self, scheme: Scheme) -> int:
        """Copies of ``scheme`` measured at once: ``⌊devices / (cp·tp·pp)⌋`` when filling the
        node (4 devices: 4 of (1,1,1), 2 of (1,2,1), 1 of (2,1,2)), else 1."""
        return self.devices // scheme.devices if self.fill_node else 1

    @property
    def description(self) -> str:
        return f"{self.device_name} ({self.device_kind}, {self.devices} local devices)"

    @property
    def software(self) -> str:
        backend = "nccl" if self.device_kind == "cuda" else "gloo"
        load = "node filled with replicas" if self.fill_node else "one scheme at a time"
        return (f"torch {self.torch_version}, {backend}, {self.precision}, {self.threads} threads per process, "
                f"{self.clock.value} clock, {load}")


@dataclass(frozen=True)
class Measurement:
    """One point's result; ``samples_ms`` holds every timed micro-batch's slowest-rank time (lines
    cached before micro-batches were timed apart: every repeat's), ``wall_s`` the
    point's share of the wall time its measuring took (warm-up and repeats; 0: not recorded),
    ``handoff_ms`` the pipeline hand-off ``d`` its runs imply (:mod:`hydraulis.profiler.handoff`;
    None: not a whole pipeline of ``pp > 1`` timed on the wall clock, or not recorded)."""

    point: SweepPoint
    status: MeasureStatus
    time_ms: float = 0.0
    forward_ms: float = 0.0
    activation_bytes: float = 0.0
    samples_ms: tuple[float, ...] = ()
    wall_s: float = 0.0
    handoff_ms: float | None = None

    @property
    def ok(self) -> bool:
        return self.status is MeasureStatus.OK


@dataclass(frozen=True)
class ReductionMeasurement:
    """The runtime's step with no micro-batch on ``devices`` ranks (module docstring): medians
    over the timed steps of the whole step (slowest rank), of its propagation and of the rest
    (reduction and update); ``samples_ms`` holds every timed step; ``communicator_ms`` the time
    to create a communicator and use it once (None: not measured, a cache line older than the
    measurement); ``overlap`` the share ``ω`` of an exchange that runs under compute on the
    device (:func:`overlap_share`; None: not measured)."""

    devices: int
    time_ms: float
    propagate_ms: float
    reduce_ms: float
    samples_ms: tuple[float, ...] = ()
    communicator_ms: float | None = None
    overlap: float | None = None


def overlap_share(exchange_ms: float, compute_ms: float, both_ms: float) -> float:
    """``ω = (t_e + t_c − t_both) / min(t_e, t_c)`` clipped to [0, 1]: how much of the shorter
    of an exchange alone (``t_e``) and a compute alone (``t_c``) disappears when both run
    together (``t_both``) — 1 when ``t_both = max(t_e, t_c)``, 0 when ``t_both = t_e + t_c``.
    Worked example: 10 ms of exchange, 12 ms of compute, 15 ms together: ``(10 + 12 − 15) / 10
    = 0.7``."""
    shorter = min(exchange_ms, compute_ms)
    if shorter <= 0:
        return 0.0
    return min(1.0, max(0.0, (exchange_ms + compute_ms - both_ms) / shorter))


@dataclass(frozen=True)
class MeasureSettings:
    """What, besides the point, a measurement depends on."""

    model: ModelSpec
    environment: Environment
    repeats: int
    warmup: int
    statistic: Statistic = Statistic.MIN


@dataclass(frozen=True)
class MeasureJob:
    """The points one job measures in order, how, the cache folder it appends them to, and the
    progress so far (``done`` of ``total`` points), which points share the measuring rounds; then,
    when ``reduction`` > 0, the reduction on that many ranks."""

    points: tuple[SweepPoint, ...]
    settings: MeasureSettings
    cache: str
    done: int
    total: int
    seed: int = 0
    reduction: int = 0
    interleave: Interleave = Interleave.SCHEME

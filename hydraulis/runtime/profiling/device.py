"""The local devices a profile runs on: which, how many processes, what they are called, how
loaded the node is while a point runs, and which clock times it.

* CUDA (``--device cuda``, or ``auto`` with a GPU): one process per GPU, bf16, NCCL, the
  **wall** clock (after synchronising the GPU); the device's memory is what the GPU reports
  free once the process holds its CUDA context (``torch.cuda.mem_get_info``), recorded in the
  space: the planner subtracts the device preset's overhead (what a process holds outside the
  allocator, the context included — so measured spaces count the context twice, ~0.5 GiB) and
  fragmentation margin from it.
* CPU: gloo, fp32, one intra-op thread per process by default — the trainer's default too
  (:class:`~hydraulis.job.config.RuntimeOptions`), since a space predicts training only at the
  thread count it was measured with — and at most :data:`PROCESSES_PER_CORE` processes per core
  (two cores profile schemes of up to 4 devices).

Why the node is filled, which clock, and why the sweep is interleaved on CPU:
:func:`default_fill_node`, :func:`default_clock`, :func:`default_interleave`."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path

import torch

from hydraulis.base.errors import require
from hydraulis.job.config import RuntimeOptions
from hydraulis.profiler.measurement import Clock, Environment
from hydraulis.profiler.sweep import Interleave
from hydraulis.sharding.kinds import DeviceKind, Precision

PROCESSES_PER_CORE = 2
TIMEOUT_S = 600.0
"""Bound on every wait of a measuring rank (a stage of a large model takes a while to build)."""


@dataclass(frozen=True)
class LocalDevices:
    """The resolved device kind, the environment of the measurements, the ranks' options."""

    kind: DeviceKind
    environment: Environment
    options: RuntimeOptions


def local_devices(kind: DeviceKind, max_procs: int | None, threads: int, clock: Clock | None,
                  fill_node: bool | None = None) -> LocalDevices:
    """Resolve ``auto``, check ``max_procs`` (default: the limit) against :func:`process_limit`,
    choose whether to fill the node (default :func:`default_fill_node`), the clock (default
    :func:`default_clock`) and the precision (bf16 on CUDA, fp32 on CPU)."""
    require(threads >= 1, "threads", threads, "must be >= 1")
    kind = resolve_device(kind)
    limit = process_limit(kind)
    processes = limit if max_procs is None else max_procs
    require(processes >= 1, "max_procs", processes, "must be >= 1")
    allowed = "one per GPU" if kind is DeviceKind.CUDA else f"{PROCESSES_PER_CORE} per CPU core"
    require(processes <= limit, "max_procs", processes, f"exceeds the {limit} processes allowed here ({allowed})")
    fill = default_fill_node(kind) if fill_node is None else fill_node
    environment = local_environment(kind, threads, processes, clock or default_clock(kind, fill), fill)
    options = RuntimeOptions(device=kind, precision=Precision(environment.precision), threads=threads,
                             timeout_s=TIMEOUT_S)
    return LocalDevices(kind, environment, options)


def resolve_device(kind: DeviceKind) -> DeviceKind:
    """``auto`` → CUDA when a GPU is visible, else CPU; CUDA asked for but absent is an error."""
    if kind is DeviceKind.CUDA:
        require(torch.cuda.is_available(), "device", kind.value, "is not available on this machine")
    if kind is DeviceKind.AUTO:
        return DeviceKind.CUDA if torch.cuda.is_available() else DeviceKind.CPU
    return kind


def cuda_device_name(kind: DeviceKind) -> str | None:
    """The name of the GPU a job asking for ``kind`` runs on (its first: a job's GPUs are
    alike), or None when it runs on the CPU."""
    return torch.cuda.get_device_name(0) if resolve_device(kind) is DeviceKind.CUDA else None


def process_limit(kind: DeviceKind) -> int:
    """The most processes a scheme may use here: the GPUs, or 2 per CPU core."""
    if kind is DeviceKind.CUDA:
        return torch.cuda.device_count()
    return PROCESSES_PER_CORE * _cores()


def default_fill_node(kind: DeviceKind) -> bool:
    """Fill the node on CPU, not on CUDA.

    **Filling the node** (``--fill-node``, the default on CPU). A training step that fills ``N``
    devices runs ``N`` ranks at once; on a CPU a device is a process, and ``N`` processes over
    ``C < N`` cores each get about ``C/N`` of a core, so a rank's step takes ``N/C`` times its busy
    time or more. A scheme of ``d`` devices measured alone on an otherwise idle CPU gets a core per
    rank and predicts ``N/C`` times too little. With ``fill_node`` every point runs on
    ``⌊N/d⌋`` replicas of its scheme at once — data-parallel pipelines, as in a homogeneous
    strategy of that scheme — all running the same micro-batches, and is timed by the **wall**
    clock: the time a pipeline of the scheme takes while the node is as loaded as by a training
    step that fills it; the slowest rank of all replicas is kept. A strategy that leaves devices
    idle runs faster than so predicted (an idle rank waiting in gloo takes no CPU), and so does a
    heterogeneous one whose other pipelines idle in their pipeline bubbles. On GPUs each replica
    has its own device and the figures hardly change (shared host, power), so filling is off there
    by default.
    """
    return kind is DeviceKind.CPU


def default_interleave(kind: DeviceKind) -> Interleave:
    """Every scheme in the same rounds on CPU, each scheme apart on CUDA.

    **Interleaving over the sweep** (``--interleave sweep``, the default on CPU). A shared CPU's
    speed drifts over minutes; schemes measured one after the other would each carry the speed of
    their own minutes into the space, and a strategy's pipelines of different schemes would be
    mispredicted against each other. Measuring every scheme in the same rounds
    (:mod:`hydraulis.runtime.profiling.measure`) gives them the same drift. On CUDA, where a sweep of a large
    model runs for hours and points run out of memory as the profile finds capacities, each scheme
    is measured in rounds of its own (``--interleave scheme``), so a killed sweep or a restart after
    running out of memory repeats one scheme at most.
    """
    return Interleave.SWEEP if kind is DeviceKind.CPU else Interleave.SCHEME


def default_clock(kind: DeviceKind, fill_node: bool) -> Clock:
    """Wall on CUDA and on a filled node, busy time for one scheme at a time on CPU.

    ``--no-fill-node`` measures one scheme at a time, by default with the **cpu** clock on CPU:
    each rank's busy time (its process's CPU time), which excludes the waits for a core on an
    oversubscribed or shared CPU (repeats of one point
    spread far less in busy time than in wall time). It is what a rank would
    take on a core of its own (a machine with a core per process); ``--clock wall`` times elapsed
    time instead.
    """
    return Clock.WALL if kind is DeviceKind.CUDA or fill_node else Clock.CPU


def local_environment(kind: DeviceKind, threads: int, processes: int, clock: Clock,
                      fill_node: bool = False) -> Environment:
    """The facts of the resolved device ``kind`` that measurements depend on."""
    if kind is DeviceKind.CUDA:
        require(clock is Clock.WALL, "clock", clock.value, "must be wall on CUDA (kernels run asynchronously)")
        name = torch.cuda.get_device_name(0)
        return Environment("cuda", name, torch.__version__, Precision.BF16.value, threads, processes,
                           torch.cuda.mem_get_info(0)[0], clock, fill_node)
    return Environment("cpu", f"{_cpu_name()}, {_cores()} cores", torch.__version__, Precision.FP32.value, threads,
                       processes, 0, clock, fill_node)


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _cpu_name() -> str:
    info = Path("/proc/cpuinfo")
    if info.is_file():
        for line in info.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "cpu"

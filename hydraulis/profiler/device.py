"""The local devices a profile runs on: which, how many processes, what they are called, and
which clock times them.

* CUDA (``--device cuda``, or ``auto`` with a GPU): one process per GPU, bf16, NCCL, the
  **wall** clock (after synchronising the GPU); the device's memory is the GPU's
  (``torch.cuda.get_device_properties``).
* CPU: gloo, fp32, one intra-op thread per process by default, at most
  :data:`PROCESSES_PER_CORE` processes per core (a 2-core machine profiles schemes of up to 4
  devices), and by default the **cpu** clock: each rank's busy time (its process's CPU time).
  A CPU device is a core; with more processes than cores, and on a machine shared with other
  work, the wall time of a rank is mostly the time it waits for a core — on the 2-core
  reference machine under a load average of 8, repeats of one point spread 4× in wall time and
  about ±10 % in busy time. Busy time is what the rank would take on a core of its own, less the
  waits for its peers (loopback latency, small next to a micro-batch). Compare a training run
  with it as such: its wall time on ``N`` processes over ``C < N`` idle cores is at least
  ``N/C`` times the busy time. ``--clock wall`` measures elapsed time instead (a quiet machine
  with a core per process).
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path

import torch

from hydraulis.errors import require
from hydraulis.profiler.measurement import Clock, Environment
from hydraulis.runtime.config import DeviceKind, Precision, RuntimeOptions

PROCESSES_PER_CORE = 2
TIMEOUT_S = 600.0
"""Bound on every wait of a measuring rank (a stage of a large model takes a while to build)."""


@dataclass(frozen=True)
class LocalDevices:
    """The resolved device kind, the environment of the measurements, the ranks' options."""

    kind: DeviceKind
    environment: Environment
    options: RuntimeOptions


def local_devices(kind: DeviceKind, max_procs: int | None, threads: int, clock: Clock | None) -> LocalDevices:
    """Resolve ``auto``, check ``max_procs`` (default: the limit) against :func:`process_limit`,
    choose the clock (default :func:`default_clock`) and the precision (bf16 on CUDA, fp32 on CPU)."""
    require(threads >= 1, "threads", threads, "must be >= 1")
    kind = resolve_device(kind)
    limit = process_limit(kind)
    processes = limit if max_procs is None else max_procs
    require(processes >= 1, "max_procs", processes, "must be >= 1")
    allowed = "one per GPU" if kind is DeviceKind.CUDA else f"{PROCESSES_PER_CORE} per CPU core"
    require(processes <= limit, "max_procs", processes, f"exceeds the {limit} processes allowed here ({allowed})")
    environment = local_environment(kind, threads, processes, clock or default_clock(kind))
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


def process_limit(kind: DeviceKind) -> int:
    """The most processes a scheme may use here: the GPUs, or 2 per CPU core."""
    if kind is DeviceKind.CUDA:
        return torch.cuda.device_count()
    return PROCESSES_PER_CORE * _cores()


def default_clock(kind: DeviceKind) -> Clock:
    """Wall on CUDA, busy time on CPU (module docstring)."""
    return Clock.WALL if kind is DeviceKind.CUDA else Clock.CPU


def local_environment(kind: DeviceKind, threads: int, processes: int, clock: Clock) -> Environment:
    """The facts of the resolved device ``kind`` that measurements depend on."""
    if kind is DeviceKind.CUDA:
        require(clock is Clock.WALL, "clock", clock.value, "must be wall on CUDA (kernels run asynchronously)")
        name = torch.cuda.get_device_name(0)
        return Environment("cuda", name, torch.__version__, Precision.BF16.value, threads, processes,
                           torch.cuda.get_device_properties(0).total_memory, clock)
    return Environment("cpu", f"{_cpu_name()}, {_cores()} cores", torch.__version__, Precision.FP32.value, threads,
                       processes, 0, clock)


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _cpu_name() -> str:
    info = Path("/proc/cpuinfo")
    if info.is_file():
        for line in info.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "cpu"

"""Tiny planning instances built by hand: options without a scheme space, workloads of a few buckets."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hydraulis.base.types import Scheme, TimeCoefficients
from hydraulis.cost import MemoryBreakdown
from hydraulis.planner.distribution import ExpectedStep
from hydraulis.planner.options import SchemeOption

LENGTHS = Path(__file__).resolve().parents[2] / "examples" / "data" / "longtail.txt"
"""The bundled long-tail lengths file (examples/data/README.md)."""

MEMORY = MemoryBreakdown(compute_states=1e9, optimizer_states=1e9, overhead=1e9, safety_margin=1e9,
                         activation_per_token=1e5, device_memory=80e9)


def option(cp: int, tp: int, pp: int, a: float, b: float, c: float, capacity: int, reduce_ms: float) -> SchemeOption:
    return SchemeOption(Scheme(cp, tp, pp), TimeCoefficients(a, b, c), capacity, MEMORY, reduce_ms)


def workload(lengths: list[int], counts: list[float], maxima: list[int], width: int) -> ExpectedStep:
    """One bucket per entry of ``lengths`` (all sequences of a bucket have that length)."""
    s, n = np.asarray(lengths, dtype=float), np.asarray(counts, dtype=float)
    upper = (np.ceil(s / width) * width).astype(np.int64)
    return ExpectedStep(counts=n, tokens=n * s, squares=n * s * s, upper=upper, maxima=np.asarray(maxima))


def random_instance(seed: int) -> tuple[list[SchemeOption], ExpectedStep, int, int]:
    """2–4 schemes (the fourth pipeline-parallel), 4–6 buckets, 8 or 16 devices; the last value
    is the longest length the strategy must hold. Small schemes are cheaper per device for
    short sequences and only large ones hold the long ones, so mixes often win."""
    rng = np.random.default_rng(seed)
    jitter = rng.uniform(0.8, 1.2, size=4)
    options = [
        option(1, 2, 1, 2e-6, 0.090 * jitter[0], 10.0, 6000, 20.0),
        option(1, 4, 1, 1e-6, 0.050 * jitter[1], 12.0, 14000, 10.0),
        option(1, 8, 1, 5e-7, 0.030 * jitter[2], 15.0, 30000, 5.0),
        option(1, 2, 2, 1e-6, 0.046 * jitter[3], 6.0, 7000, 10.0),
    ][: int(rng.integers(2, 5))]
    devices = 8 if len(options) == 4 else int(rng.choice([8, 16]))
    held = max(o.capacity for o in options)
    longest = int(rng.choice([n for n in (5000, 12000, 24000) if n <= held]))
    short = sorted(rng.choice(np.arange(1, 16) * 200, size=int(rng.integers(2, 4)), replace=False).tolist())
    medium = sorted(rng.choice(np.arange(10, longest // 400) * 400, size=int(rng.integers(1, 3)), replace=False).tolist())
    lengths = short + medium + [longest]
    counts = ([float(rng.uniform(4.0, 40.0)) for _ in short] + [float(rng.uniform(0.5, 3.0)) for _ in medium]
              + [float(rng.uniform(0.3, 1.5))])
    return options, workload(lengths, counts, [longest, longest - 200], 128), devices, longest

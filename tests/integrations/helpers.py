"""Analytic spaces of ``(k, tp, 1)`` schemes and long-tailed batches for the integration tests."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from hydraulis.base.presets import device_preset, model_preset
from hydraulis.base.specs import Cluster
from hydraulis.base.types import SchemeSpace
from hydraulis.profiler.analytic import analytic_scheme_space


@lru_cache(maxsize=None)
def cp_space(ranks: int, tp: int = 8, model: str = "llama-7b", device: str = "a800-80g",
             cps: tuple[int, ...] = (1, 2, 4, 8, 16)) -> SchemeSpace:
    spec = device_preset(device)
    cluster = Cluster(ranks * tp, spec.devices_per_node, spec.name)
    return analytic_scheme_space(model_preset(model), spec, cluster, cps, (tp,), (1,), created="2026-01-01T00:00:00+00:00",
                                 tool_version="test")


def long_tailed(count: int, longest: int, seed: int) -> np.ndarray:
    """``count`` lengths, lognormal around 1K, a few near ``longest``."""
    rng = np.random.default_rng(seed)
    lengths = np.minimum(rng.lognormal(7.0, 1.2, size=count).astype(np.int64) + 16, longest)
    lengths[: max(1, count // 50)] = rng.integers(longest // 2, longest + 1, size=max(1, count // 50))
    return lengths

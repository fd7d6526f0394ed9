"""Compare the analytic scheme space with the original system's measured pools (A800).

Prints, per scheme of the bundled 7B and 13B pools, the analytic / measured ratios of the
coefficients a (attention, ms/token²), b (linear, ms/token) and c (fixed, ms), and of the
predicted time of one micro-batch of 4K and 16K tokens (a single document).

    python benchmarks/analytic_vs_reference.py
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np

from hydraulis.artifacts.original_pool import pool_shape
from hydraulis.base.presets import device_preset, model_matching, pool_location
from hydraulis.base.types import Cluster, Scheme
from hydraulis.cli.output import table
from hydraulis.profiler.analytic import analytic_profile


def compare(pool_name: str) -> None:
    document = json.loads(open(pool_location(f"bundled:{pool_name}")).read())
    model = model_matching(*pool_shape(document))
    device = device_preset("a800-80g")
    cluster = Cluster(64, 8, device.name)
    rows, ratios_a, ratios_b = [], [], []
    for entry in document["strategies"]:
        scheme = Scheme(1, entry["tp"], entry["pp"])
        analytic = analytic_profile(model, device, cluster, scheme).time
        measured = replace(analytic, a=entry["a"], b=entry["b"], c=entry["c"])
        ratios_a.append(analytic.a / measured.a)
        ratios_b.append(analytic.b / measured.b)
        rows.append([str(scheme), analytic.a / measured.a, analytic.b / measured.b, analytic.c / measured.c,
                     analytic.microbatch_ms([4096]) / measured.microbatch_ms([4096]),
                     analytic.microbatch_ms([16384]) / measured.microbatch_ms([16384])])
    print(f"\n{model.name} (pool {pool_name}), analytic on a800-80g / measured")
    print(table(["scheme", "a ratio", "b ratio", "c ratio", "t(4K) ratio", "t(16K) ratio"], rows))
    print(f"geometric mean: a {np.exp(np.mean(np.log(ratios_a))):.2f}, b {np.exp(np.mean(np.log(ratios_b))):.2f}")


if __name__ == "__main__":
    for name in ("7b", "13b"):
        compare(name)

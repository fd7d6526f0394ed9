"""Scheme variants (sequence parallelism, recomputing k of L layers) against plain schemes:
each scheme's longest sequence plain and with full recomputation, and the proposal's predicted
mean step time with and without variants on the same steps and cost model.

    .venv/bin/python benchmarks/variants_gain.py [--models llama-7b,llama-32b] [--devices 32,64]

Settings (issue 18's acceptance): LLaMA-7B and LLaMA-32B analytic spaces with segments on A800
and H100 (8 per node), 32 and 64 devices, 200K tokens per step, 32K maximum, the bundled
long-tail lengths (``examples/data/longtail.txt``). Longest sequences are under the ZeRO-1
layout over all devices (``space show``'s default). Both proposals are judged on the planner's
sampled steps (same seed), each step on the strategy serving it, with the cost model of
:func:`~hydraulis.planner.evaluate.estimate_step` under each proposal's own optimizer layout.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from hydraulis import __version__
from hydraulis.artifacts import read_lengths
from hydraulis.base.errors import HydraulisError
from hydraulis.base.presets import device_preset, model_preset
from hydraulis.base.types import Cluster, OptimizerLayout, Proposal, SchemeSpace
from hydraulis.base.workload import sample_batches
from hydraulis.planner import PlannerConfig, propose
from hydraulis.planner.config import Variants
from hydraulis.planner.evaluate import CostContext, estimate_step
from hydraulis.planner.space_rows import space_rows
from hydraulis.profiler.analytic import analytic_scheme_space

LENGTHS = Path(__file__).resolve().parents[1] / "examples" / "data" / "longtail.txt"
CREATED = "2026-01-01T00:00:00+00:00"
TOKENS = 200_000
MAX_SEQ_LEN = 32_768
DEGREES = (1, 2, 4, 8)


def space_with_segments(model: str, device: str, devices: int) -> SchemeSpace:
    spec = device_preset(device)
    return analytic_scheme_space(model_preset(model), spec, Cluster(devices, spec.devices_per_node, spec.name),
                                 DEGREES, DEGREES, DEGREES, created=CREATED, tool_version=__version__, segments=True)


def longest_table(space: SchemeSpace) -> list[str]:
    """Per plain scheme: its longest sequence plain and with every layer recomputed in full."""
    rows = space_rows(space, OptimizerLayout(space.cluster.devices, 1, 1))
    full = {(r["cp"], r["tp"], r["pp"]): r for r in rows if r["options"] == ["recompute=full"]}
    lines = []
    for row in (r for r in rows if not r["options"]):
        recomputing = full[row["cp"], row["tp"], row["pp"]]
        lines.append(f"    ({row['cp']},{row['tp']},{row['pp']})  plain {row['max_seq_len']:>7d}  "
                     f"full recomputation {recomputing['max_seq_len']:>7d} ({recomputing['limit']})")
    return lines


def mean_step_ms(proposal: Proposal, space: SchemeSpace, steps: list[np.ndarray]) -> float:
    """The proposal's predicted mean step time on ``steps``, each on the strategy serving it."""
    context = CostContext(space.model.params, proposal.optimizer_layout, space.reduce_gbps, space.pipeline_model)
    times = []
    for step in steps:
        serving = next(p.strategy for p in proposal.strategies if p.serves_from < step.max() <= p.serves_to)
        times.append(estimate_step(serving, step, context).step_ms)
    return float(np.mean(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="llama-7b,llama-32b")
    parser.add_argument("--hardware", default="a800-80g,h100-80g")
    parser.add_argument("--devices", default="32,64")
    args = parser.parse_args()
    lengths = read_lengths(LENGTHS)
    results = []
    for model in args.models.split(","):
        for device in args.hardware.split(","):
            for devices in (int(d) for d in args.devices.split(",")):
                space = space_with_segments(model, device, devices)
                print(f"\n{model} on {devices} × {device}: longest sequence per scheme (ZeRO-1 over {devices})")
                print("\n".join(longest_table(space)))
                config = PlannerConfig(devices, space.cluster.devices_per_node, TOKENS, MAX_SEQ_LEN)
                steps = sample_batches(lengths, config.token_budget, config.steps, config.max_seq_len, config.seed)
                means = {}
                for variants in Variants:
                    started = time.perf_counter()
                    try:
                        proposal = propose(space, lengths, replace(config, variants=variants))
                    except HydraulisError as error:
                        print(f"  variants {variants.value:4s}: no proposal: {error}")
                        means[variants] = math.nan
                        continue
                    means[variants] = mean_step_ms(proposal, space, steps)
                    print(f"  variants {variants.value:4s}: mean step {means[variants]:8.1f} ms "
                          f"({time.perf_counter() - started:.1f} s to propose)")
                    for p in proposal.strategies:
                        print(f"    ({p.serves_from}, {p.serves_to}]: {p.strategy}  {p.predicted_ms:.0f} ms")
                results.append((model, device, devices, means[Variants.NONE], means[Variants.ALL]))
    print(f"\n{'model':10s} {'device':10s} {'devices':>7s} {'plain_ms':>9s} {'variants_ms':>11s} {'gain':>6s}  "
          "(nan: no proposal)")
    for model, device, devices, plain, varied in results:
        print(f"{model:10s} {device:10s} {devices:7d} {plain:9.1f} {varied:11.1f} {plain / varied:6.3f}")


if __name__ == "__main__":
    main()

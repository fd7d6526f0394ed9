"""Fused schedules on twelve uniform instances and one variable-length case from step plans.

    .venv/bin/python paper_exp/fused/run.py [--time-limit 90] [--workers 2]

Writes the problems to ``paper_exp/fused/problems/``, runs ``hydraulis fuse`` on each (schedules
in ``out/paper_exp/fused/``, not committed) and writes ``paper_exp/fused/results/``:
``table.md``/``table.csv`` (sequential, greedy, fused, bound, speed-up, peak memory, wall time;
then the same instance under a memory limit of twice the sequential schedule's peak)
and ``gantt.png`` (the first N = 16 instance). The variable-length case builds two step plans
(LLaMA-13B actor on 1×(1,1,8), LLaMA-7B critic on 2×(1,1,4), eight H100s, analytic scheme
spaces, one batch of long-tailed documents each) and fuses them with ``--from-step-plans``.
"""

from __future__ import annotations

import argparse
import csv
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from hydraulis.artifacts import timestamp, write_scheme_space, write_step_plan
from hydraulis.artifacts.fused import read_fused_schedule, write_fused_problem
from hydraulis.artifacts.lengths import read_lengths
from hydraulis.base.presets import device_preset, model_preset
from hydraulis.base.types import (
    Cluster,
    OptimizerLayout,
    PipelineGroup,
    Proposal,
    ProposedStrategy,
    SolverReport,
    Strategy,
)
from hydraulis.base.workload import sample_batches
from hydraulis.cost.memory import scheme_capacities
from hydraulis.dispatch import dispatch
from hydraulis.fused import FusedProblem, fused_model, simulate, task_graph
from hydraulis.fused.baselines import sequential_order
from hydraulis.profiler.analytic import analytic_scheme_space

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OUT = ROOT / "out" / "paper_exp" / "fused"

ACTOR_FORWARD_MS = 10.0
ACTOR_MEMORY = 2.0
MEMORY_FACTOR = 2.0
"""Second run of every instance: memory limit = this × the sequential schedule's peak."""

# (devices, critic stages, micro-batches, critic speed-up per stage, critic memory per micro-batch)
INSTANCES = (
    (8, 4, 8, 2.0, 1.0), (8, 8, 8, 1.0, 2.0), (8, 4, 16, 2.5, 1.5), (8, 8, 32, 1.5, 1.0),
    (8, 4, 64, 1.25, 2.0), (8, 8, 64, 2.0, 1.5),
    (16, 8, 8, 2.0, 1.0), (16, 16, 16, 1.0, 1.5), (16, 8, 32, 1.5, 2.0), (16, 16, 32, 2.5, 1.0),
    (16, 8, 64, 2.0, 1.5), (16, 16, 64, 1.5, 1.0),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--time-limit", type=float, default=90.0)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    (HERE / "results").mkdir(parents=True, exist_ok=True)
    rows = [_run_instance(*spec, args) for spec in INSTANCES]
    rows.append(_variable_length_case(args))
    _write_tables(rows)


def instance(devices: int, critic_stages: int, micro_batches: int, speedup: float, memory: float) -> FusedProblem:
    """Actor: ``devices`` stages, forward; critic: ``critic_stages`` stages, reverse, ``speedup``× faster."""
    return FusedProblem(devices, (
        fused_model("actor", devices, 1, "forward", micro_batches, ACTOR_FORWARD_MS, 2 * ACTOR_FORWARD_MS,
                    ACTOR_MEMORY),
        fused_model("critic", critic_stages, devices // critic_stages, "reverse", micro_batches,
                    ACTOR_FORWARD_MS / speedup, 2 * ACTOR_FORWARD_MS / speedup, memory)))


def _run_instance(devices, critic_stages, micro_batches, speedup, memory, args) -> dict:
    name = f"n{devices}_s{critic_stages}_m{micro_batches}"
    problem_path = HERE / "problems" / f"{name}.json"
    write_fused_problem(problem_path, instance(devices, critic_stages, micro_batches, speedup, memory))
    gantt = HERE / "results" / "gantt.png" if name == "n16_s8_m8" else None
    row = _fuse(name, ["--problem", str(problem_path)], args, gantt)
    problem = instance(devices, critic_stages, micro_batches, speedup, memory)
    graph = task_graph(problem)
    limit = MEMORY_FACTOR * simulate(graph, sequential_order(problem, graph)).peak_memory
    limited = _fuse(f"{name}_memory", ["--problem", str(problem_path), "--memory-limit", str(limit)], args, None)
    row.update(devices=devices, critic=f"{devices // critic_stages}×S{critic_stages}", m=micro_batches,
               critic_faster=speedup, sequential_peak=limit / MEMORY_FACTOR, limited_ms=limited["fused_ms"],
               limited_speedup=limited["speedup_vs_sequential"], limited_peak=limited["peak_memory"])
    return row


def _fuse(name: str, source: list[str], args, gantt: Path | None) -> dict:
    schedule_path = OUT / f"{name}.schedule.json"
    command = [sys.executable, "-m", "hydraulis", "fuse", *source, "--time-limit", str(args.time_limit),
               "--workers", str(args.workers), "-o", str(schedule_path)]
    if gantt:
        command += ["--gantt", str(gantt)]
    began = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    wall = time.monotonic() - began
    print(done.stdout.strip().splitlines()[-1], f"({name}, {wall:.1f} s)", flush=True)
    s = read_fused_schedule(schedule_path)
    return {"instance": name, "sequential_ms": s.sequential_ms, "greedy_ms": s.greedy_ms,
            "fused_ms": s.makespan_ms, "bound_ms": s.lower_bound_ms, "fused_over_bound": s.makespan_ms / s.lower_bound_ms,
            "speedup_vs_sequential": s.sequential_ms / s.makespan_ms, "peak_memory": s.peak_memory, "stop": s.stop,
            "wall_s": wall}


def _variable_length_case(args) -> dict:
    """Two step plans of one long-tailed batch each, fused end to end."""
    lengths = read_lengths(ROOT / "examples" / "data" / "longtail.txt")
    batches = sample_batches(lengths, 65_536, 2, 8192, seed=0)
    source = []
    for i, (model, pp, count) in enumerate((("llama-13b", 8, 1), ("llama-7b", 4, 2))):
        space = analytic_scheme_space(model_preset(model), device_preset("h100-80g"), Cluster(8, 8, "h100-80g"),
                                      [1], [1], [pp], timestamp(), "paper_exp/fused/run.py")
        layout = OptimizerLayout(8 // pp, 1, pp)
        capacity = scheme_capacities(space, layout)[0]
        group = PipelineGroup(capacity.profile.scheme, count, capacity.max_seq_len, capacity.profile.time)
        proposal = Proposal(space.model, 8, 8, layout,
                            (ProposedStrategy(Strategy((group,)), 0, capacity.max_seq_len, 0.0, 0.0, (0,)),),
                            65_536, capacity.max_seq_len, space.pipeline_model, SolverReport("fixed", "fixed", 0.0))
        plan = dispatch(proposal, np.minimum(batches[i], capacity.max_seq_len))
        write_scheme_space(OUT / f"space_{i}.json", space)
        write_step_plan(OUT / f"plan_{i}.json", plan)
        source += [str(OUT / f"plan_{i}.json")]
    row = _fuse("variable_length", ["--from-step-plans", *source, "--spaces", str(OUT / "space_0.json"),
                                    str(OUT / "space_1.json"), "--problem-out",
                                    str(HERE / "problems" / "variable_length.json")], args, None)
    row.update(devices=8, critic="2×S4 (7B)", m="from plans", critic_faster="varies", sequential_peak="",
               limited_ms="", limited_speedup="", limited_peak="")
    return row


def _write_tables(rows: list[dict]) -> None:
    columns = ("instance", "devices", "critic", "m", "critic_faster", "sequential_ms", "greedy_ms", "fused_ms",
               "bound_ms", "fused_over_bound", "speedup_vs_sequential", "peak_memory", "sequential_peak", "wall_s", "limited_ms",
               "limited_speedup", "limited_peak")
    results = HERE / "results"
    results.mkdir(parents=True, exist_ok=True)
    with open(results / "table.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows({c: row[c] for c in columns} for row in rows)
    within = sum(1 for row in rows[:len(INSTANCES)] if row["fused_over_bound"] <= 1.01)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row[c]) for c in columns) + " |" for row in rows]
    lines += ["", f"{within} of {len(INSTANCES)} uniform instances within 1 % of the lower bound; "
                  f"actor forward {ACTOR_FORWARD_MS:g} ms per stage (backward twice), memory {ACTOR_MEMORY:g} "
                  "per micro-batch; memory in problem units (bytes for the step-plan case). `limited_*`: the same "
                  f"instance with `--memory-limit` {MEMORY_FACTOR:g} × the sequential schedule's peak."]
    (results / "table.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e6 else f"{value:.3e}"
    return re.sub(r"\|", "/", str(value))


if __name__ == "__main__":
    main()

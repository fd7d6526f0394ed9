"""``hydraulis fuse``: a fused schedule of two models' pipelines on the same devices."""

from __future__ import annotations

import argparse
import os
import time

from hydraulis.artifacts.fused import read_fused_problem, write_fused_problem, write_fused_schedule
from hydraulis.artifacts.scheme_space import read_scheme_space
from hydraulis.artifacts.step_plan import read_step_plan
from hydraulis.base import limits
from hydraulis.base.errors import HydraulisError
from hydraulis.cli.arguments import Bounded, FileKind, InputFile, OutputPath
from hydraulis.cli.output import emit, table
from hydraulis.fused import FuseOptions, Placement, fuse, fused_schedule, problem_from_step_plans


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "fuse", help="fuse two models' pipelines on the same devices (RLHF actor + critic)",
        description="Search a per-device task order for two models whose pipelines share the devices, "
                    "flowing in opposite directions so each fills the other's bubbles: simulated annealing "
                    "from list schedules, judged against a proven lower bound and the sequential, greedy and "
                    "interleaved baselines. Prints the sequential, greedy, interleaved and fused makespans and "
                    "the bound; the last line reads makespan=… lower_bound=… sequential=…",
        epilog="paper_exp/fused/run.py regenerates its 12-instance table.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--problem", metavar="JSON", type=InputFile(FileKind.FUSED_PROBLEM), help="fused problem JSON (devices, models)")
    source.add_argument("--from-step-plans", nargs=2, metavar=("A_PLAN", "B_PLAN"), type=InputFile(FileKind.STEP_PLAN),
                        help="build the problem from two step plans (needs --spaces)")
    parser.add_argument("--spaces", nargs=2, metavar=("A_SPACE", "B_SPACE"), type=InputFile(FileKind.SCHEME_SPACE),
                        help="the scheme spaces that time the step plans' micro-batches")
    parser.add_argument("--device-map", default="forward,reverse", metavar="PA,PB",
                        help="placement of each step plan's stages on the devices (default forward,reverse)")
    parser.add_argument("--problem-out", metavar="JSON", type=OutputPath(), help="write the problem built from the step plans")
    parser.add_argument("--time-limit", type=Bounded(limits.TIME_LIMIT_S), default=60.0, metavar="SEC",
                        help="stop the search after this many seconds (default 60)")
    parser.add_argument("--workers", type=Bounded(limits.PROCESSES), default=os.cpu_count() or 1,
                        help="annealing processes, one start each (default: all cores)")
    parser.add_argument("--seed", type=Bounded(limits.SEED), default=0, help="seed of starts and moves (default 0)")
    parser.add_argument("--memory-limit", type=Bounded(limits.MEMORY), metavar="X",
                        help="hard limit on the memory any device holds (problem units; default none)")
    parser.add_argument("--evaluations", type=Bounded(limits.EVALUATIONS), default=0,
                        help="per-worker budget of schedule evaluations, 0 for none (default 0)")
    parser.add_argument("-o", "--output", required=True, type=OutputPath(), metavar="SCHEDULE_JSON", help="write the schedule")
    parser.add_argument("--gantt", metavar="PNG", type=OutputPath(), help="draw the fused schedule")
    parser.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> None:
    began = time.monotonic()
    problem = _problem(args)
    options = FuseOptions(time_limit_s=args.time_limit, workers=args.workers, seed=args.seed,
                          memory_limit=args.memory_limit, evaluations=args.evaluations)
    result = fuse(problem, options)
    schedule = fused_schedule(result)
    config = {"time_limit_s": options.time_limit_s, "workers": options.workers, "seed": options.seed,
              "memory_limit": options.memory_limit, "evaluations_budget": options.evaluations,
              "source": args.problem or list(args.from_step_plans)}
    write_fused_schedule(args.output, schedule, config)
    if args.gantt:
        from hydraulis.viz.fused import draw_fused_gantt

        draw_fused_gantt(problem, schedule, args.gantt)
    rows = [["sequential", schedule.sequential_ms, 1.0], ["greedy", schedule.greedy_ms,
                                                          schedule.sequential_ms / schedule.greedy_ms],
            ["interleaved", schedule.interleaved_ms, schedule.sequential_ms / schedule.interleaved_ms],
            ["fused", schedule.makespan_ms, schedule.sequential_ms / schedule.makespan_ms],
            ["lower bound", schedule.lower_bound_ms, schedule.sequential_ms / schedule.lower_bound_ms]]
    emit(table(("schedule", "makespan_ms", "speedup_vs_sequential"), rows))
    emit(f"fused / bound {schedule.makespan_ms / schedule.lower_bound_ms:.4f}; peak memory "
         f"{schedule.peak_memory:g} (sequential {result.sequential.peak_memory:g}); stop {schedule.stop} after "
         f"{schedule.evaluations} evaluations, {time.monotonic() - began:.1f} s")
    for path, what in ((args.output, "schedule"), (args.gantt, "Gantt chart"), (args.problem_out, "problem")):
        if path:
            emit(f"wrote {what} {path}")
    emit(f"makespan={schedule.makespan_ms:.6g} lower_bound={schedule.lower_bound_ms:.6g} "
         f"sequential={schedule.sequential_ms:.6g}")


def _problem(args: argparse.Namespace):
    if args.problem:
        for flag, value in (("--spaces", args.spaces), ("--problem-out", args.problem_out)):
            if value:
                raise HydraulisError(flag, value, "goes with --from-step-plans")
        return read_fused_problem(args.problem)
    if not args.spaces:
        raise HydraulisError("--spaces", None, "is required with --from-step-plans (one scheme space per plan)")
    placements = _placements(args.device_map)
    problem = problem_from_step_plans([read_step_plan(p) for p in args.from_step_plans],
                                      [read_scheme_space(s) for s in args.spaces], placements)
    if args.problem_out:
        write_fused_problem(args.problem_out, problem)
    return problem


def _placements(text: str) -> tuple[Placement, Placement]:
    parts = text.split(",")
    names = ", ".join(p.value for p in Placement)
    if len(parts) != 2 or any(p not in {q.value for q in Placement} for p in parts):
        raise HydraulisError("--device-map", text, f"must be two placements PA,PB, each one of {names}")
    return Placement(parts[0]), Placement(parts[1])

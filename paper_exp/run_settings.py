"""Simulate every paper setting (paper_exp/settings.py) and collect one row per setting and
contender into ``paper_exp/results/runs.csv``; each setting's full outputs (simulation.json,
steps.csv, summary.csv, proposals, plots) go to ``out/paper_exp/<setting>/``.

Every number is *simulated*: predicted by the cost model (design §6) from measured (7B, 13B)
or analytic (32B) scheme spaces; nothing here runs a model.

    .venv/bin/python paper_exp/run_settings.py [--steps 100] [--only llama-7b_64dev_web,...]
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from settings import DEVICES_PER_NODE, MAX_SEQ_LEN, ROOT, Setting, all_settings  # noqa: E402

from hydraulis import __version__  # noqa: E402
from hydraulis.artifacts import read_lengths, timestamp  # noqa: E402
from hydraulis.artifacts.simulation import write_simulation  # noqa: E402
from hydraulis.io.simulation_inputs import scheme_space_for  # noqa: E402
from hydraulis.planner import PlannerConfig  # noqa: E402
from hydraulis.simulation import ContenderSummary, Simulation, SimulationConfig, simulate, summarise  # noqa: E402
from hydraulis.viz.simulation import draw_simulation  # noqa: E402

RUNS = ROOT / "paper_exp" / "results" / "runs.csv"
OUTPUTS = ROOT / "out" / "paper_exp"
COLUMNS = ("setting", "model", "devices", "token_budget", "workload", "steps", "strategies", "proposal_wall_s", "contender",
           "strategy", "mean_ms", "median_ms", "median_ratio", "p90_ratio", "median_work_ratio",
           "planning_median_ms", "planning_p90_ms", "speedup", "synthesised")


def run(setting: Setting, steps: int) -> tuple[Simulation, tuple[ContenderSummary, ...]]:
    space, space_facts = scheme_space_for(setting.space, setting.model, setting.device, setting.devices, DEVICES_PER_NODE,
                                          segments=setting.space is None)
    config = SimulationConfig(PlannerConfig(setting.devices, DEVICES_PER_NODE, setting.token_budget, MAX_SEQ_LEN),
                              steps=steps)
    simulation = simulate(space, read_lengths(setting.lengths), config, progress=True)
    summaries = summarise(simulation)
    resolved = {**config.to_dict(), "space": space_facts,
                "workload": {"source": "lengths", "path": str(setting.lengths.relative_to(ROOT))}}
    directory = OUTPUTS / setting.name
    write_simulation(directory, simulation, summaries, resolved, created=timestamp(), tool_version=__version__,
                     command=f"paper_exp/run_settings.py --only {setting.name}")
    draw_simulation(simulation, summaries, directory)
    return simulation, summaries


def rows(setting: Setting, simulation: Simulation, summaries: tuple[ContenderSummary, ...]) -> list[list]:
    return [[setting.name, setting.model, setting.devices, setting.token_budget, setting.workload,
             len(simulation.steps), len(simulation.proposal.strategies), round(simulation.proposal_wall_s, 2), s.contender.value, s.strategy,
             round(s.figures.mean_ms, 1), round(s.figures.median_ms, 1), round(s.figures.median_ratio, 4),
             round(s.figures.p90_ratio, 4), round(s.figures.median_work_ratio, 4),
             round(s.figures.planning_median_ms, 2), round(s.figures.planning_p90_ms, 2), round(s.speedup, 4),
             s.figures.synthesised]
            for s in summaries]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=100, help="simulated steps per setting (default 100)")
    parser.add_argument("--only", help="comma-separated setting names (default: all); other rows are kept")
    args = parser.parse_args()
    settings = all_settings()
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {s.name for s in settings}
        if unknown:
            parser.error(f"unknown settings {sorted(unknown)}; known: {[s.name for s in settings]}")
        settings = [s for s in settings if s.name in wanted]
    kept = _kept_rows({s.name for s in settings})
    table = []
    total, done, began = sum(s.token_budget for s in settings), 0, time.perf_counter()
    for number, setting in enumerate(settings, start=1):
        print(f"[{number}/{len(settings)}] {setting.name}", flush=True)
        started = time.perf_counter()
        simulation, summaries = run(setting, args.steps)
        table += rows(setting, simulation, summaries)
        hydraulis = summaries[0].figures
        print(f"{setting.name}: {len(simulation.proposal.strategies)} strategies, Hydraulis {hydraulis.mean_ms:.0f} ms, "
              "speed-up " + ", ".join(f"{s.contender.value} {s.speedup:.2f}×" for s in summaries[1:])
              + f" ({time.perf_counter() - started:.0f} s)", flush=True)
        done += setting.token_budget
        print(progress_line(number, len(settings), done / total, time.perf_counter() - began), flush=True)
    order = {s.name: i for i, s in enumerate(all_settings())}
    RUNS.parent.mkdir(parents=True, exist_ok=True)
    with RUNS.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        writer.writerows(sorted(kept + table, key=lambda r: order[r[0]]))
    print(f"wrote {RUNS.relative_to(ROOT)}")


def progress_line(finished: int, settings: int, share: float, elapsed_s: float) -> str:
    """Overall progress after ``finished`` of ``settings`` settings: ``share`` of the work done (a
    setting's work is taken as its token budget: dispatch time grows with the sequences per step,
    and the 1024-device settings' 1.6 M tokens dominate), the time spent and the time left at that
    pace. Worked example: a quarter of the work in 5 min leaves about 15 min."""
    left = elapsed_s * (1.0 - share) / share if share > 0 else float("nan")
    return (f"overall: {finished}/{settings} settings, {share:.0%} of the work, {elapsed_s / 60:.1f} min elapsed, "
            f"about {left / 60:.1f} min left")


def _kept_rows(replaced: set[str]) -> list[list]:
    if not RUNS.exists():
        return []
    with RUNS.open(encoding="utf-8") as handle:
        return [row for row in list(csv.reader(handle))[1:] if row[0] not in replaced]


if __name__ == "__main__":
    main()

"""The simulation artifacts written by ``hydraulis simulate`` into one directory.

The details: :func:`write_simulation`."""

from __future__ import annotations

import csv
from dataclasses import asdict, dataclass
from pathlib import Path

from hydraulis.artifacts.proposal import write_proposal
from hydraulis.artifacts.record import write_json
from hydraulis.base.files import atomic_write
from hydraulis.simulation import ContenderSummary, Family, Simulation, gap_summary

KIND = "simulation"
SCHEMA_VERSION = 1
FIGURES = ("mean_ms", "median_ms", "median_ratio", "p90_ratio", "median_work_ratio", "planning_median_ms",
           "planning_p90_ms")
STEP_FIELDS = ("step", "contender", "method", "strategy_index", "predicted_ms", "lower_bound_ms", "ratio",
               "work_bound_ms", "work_ratio", "tight_bound_ms", "planning_ms", "sequences", "tokens", "longest")


@dataclass(frozen=True)
class SimulationFiles:
    """The paths written."""

    document: Path
    steps: Path
    summary: Path
    proposals: tuple[Path, ...]


def simulation_to_dict(simulation: Simulation, summaries: tuple[ContenderSummary, ...], config: dict, *,
                       created: str, tool_version: str, command: str = "") -> dict:
    """``config`` is the resolved configuration with its inputs (``SimulationConfig.to_dict()``
    plus where the scheme space and the lengths came from)."""
    bounds = asdict(gap_summary(simulation))
    bounds["gap"] = dict(bounds.pop("parts"))
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND,
        "config": config,
        "proposal_wall_s": simulation.proposal_wall_s,
        "proposal": "proposal.json",
        "contenders": [_contender(run, summary) for run, summary in zip(simulation.runs, summaries)],
        "steps": [
            {"sequences": step.sequences, "tokens": step.tokens, "longest": step.longest,
             "work_bound_ms": step.work_bound_ms, "longest_bound_ms": step.longest_bound_ms,
             "tight_bound_ms": step.tight_bound_ms, "gap": dict(simulation.gaps[i].parts()),
             "plans": {run.contender.value: {"strategy_index": run.outcomes[i].strategy_index,
                                             "predicted_ms": run.outcomes[i].predicted_ms,
                                             "lower_bound_ms": run.outcomes[i].lower_bound_ms,
                                             "planning_ms": run.outcomes[i].planning_ms}
                       for run in simulation.runs}}
            for i, step in enumerate(simulation.steps)
        ],
        "communicators": asdict(simulation.communicators),
        "bounds": bounds,
        "created": created,
        "tool_version": tool_version,
        "command": command,
    }


def write_simulation(directory: str | Path, simulation: Simulation, summaries: tuple[ContenderSummary, ...],
                     config: dict, *, created: str, tool_version: str, command: str = "") -> SimulationFiles:
    """Write every file of :func:`write_simulation` into ``directory`` (created if needed).

    * ``simulation.json`` (``schema_version`` 1)::

          {"schema_version": 1, "kind": "simulation", "config": {<resolved configuration and inputs>},
           "proposal_wall_s", "proposal": "proposal.json",
           "contenders": [{"name", "label", "family", "method", "strategy", "candidates", "proposal",
                           "summary": {"mean_ms", "median_ms", "median_ratio", "p90_ratio",
                                       "median_work_ratio", "planning_median_ms", "planning_p90_ms",
                                       "speedup", "chosen": [...]}}],
           "steps": [{"sequences", "tokens", "longest", "work_bound_ms", "longest_bound_ms",
                      "tight_bound_ms",
                      "plans": {<contender>: {"strategy_index", "predicted_ms", "lower_bound_ms",
                                              "planning_ms"}},
                      "gap": {<term>: ms}}],
           "communicators": {"proposal", "run", "bound"},
           "bounds": {"pool_ms", "tight_ms", "predicted_over_pool", "compute_over_pool",
                      "predicted_over_tight", "gap": {<term>: median ms}},
           "created", "tool_version", "command"}

      ``speedup`` is Hydraulis' over the contender (:mod:`hydraulis.simulation.summary`);
      ``strategy_index`` −1 is a strategy synthesised for the step; ``gap`` is Hydraulis' plan's
      (:mod:`hydraulis.dispatch.gap`), ``communicators`` and ``bounds`` are over Hydraulis' steps.
    * ``steps.csv`` — one row per step and contender (the same numbers, with both ratios);
    * ``summary.csv`` — one row per contender;
    * ``proposal.json`` — the proposal (:mod:`.proposal`); ``baselines/<contender>.json`` — the
      one-strategy proposal each static or homogeneous contender ran, readable by ``plan-step``.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    proposals = [directory / "proposal.json"]
    write_proposal(proposals[0], simulation.proposal, config)
    for run in simulation.runs:
        if run.contender.family is not Family.PROPOSAL:
            proposals.append(directory / _baseline_file(run.contender.value))
            write_proposal(proposals[-1], run.proposal, {**config, "contender": run.contender.value})
    document = directory / "simulation.json"
    write_json(document, simulation_to_dict(simulation, summaries, config, created=created,
                                            tool_version=tool_version, command=command))
    steps = directory / "steps.csv"
    _write_csv(steps, STEP_FIELDS, _step_rows(simulation))
    summary = directory / "summary.csv"
    _write_csv(summary, ("contender", "label", "method", "strategy", "candidates", *FIGURES, "speedup", "chosen"),
               [[s.contender.value, s.contender.label, s.contender.method.value, s.strategy, s.candidates,
                 *(getattr(s.figures, f) for f in FIGURES), s.speedup, " ".join(map(str, s.figures.chosen))]
                for s in summaries])
    return SimulationFiles(document, steps, summary, tuple(proposals))


def _contender(run, summary: ContenderSummary) -> dict:
    contender = run.contender
    return {
        "name": contender.value, "label": contender.label, "family": contender.family.value,
        "method": contender.method.value, "strategy": summary.strategy, "candidates": summary.candidates,
        "proposal": "proposal.json" if contender.family is Family.PROPOSAL else _baseline_file(contender.value),
        "summary": {**{f: getattr(summary.figures, f) for f in FIGURES}, "speedup": summary.speedup,
                    "chosen": list(summary.figures.chosen)},
    }


def _baseline_file(name: str) -> str:
    return f"baselines/{name}.json"


def _step_rows(simulation: Simulation) -> list[list]:
    rows = []
    for i, step in enumerate(simulation.steps):
        for run in simulation.runs:
            o = run.outcomes[i]
            rows.append([i, run.contender.value, run.contender.method.value, o.strategy_index, o.predicted_ms,
                         o.lower_bound_ms, o.predicted_ms / o.lower_bound_ms, step.work_bound_ms,
                         o.predicted_ms / step.work_bound_ms, step.tight_bound_ms, o.planning_ms, step.sequences,
                         step.tokens, step.longest])
    return rows


def _write_csv(path: Path, header: tuple[str, ...], rows: list[list]) -> None:
    with atomic_write(path) as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)

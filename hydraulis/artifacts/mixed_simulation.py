"""The artifact of ``hydraulis simulate --cluster`` (design §6.7): ``mixed_simulation.json``::

    {"schema_version": 1, "kind": "mixed_simulation", "config": {<resolved configuration, cluster, inputs>},
     "fastest_group", "planning_ms",
     "contenders": [{"name", "strategy", "mean_ms", "ratio", "exact_mean_ms", "exact_ratio",
                     "step_ms": [...], "exact_ms": [...]}],
     "bound": {"mean_ms", "work_ms": [...], "longest_ms": [...]},
     "created", "tool_version", "command"}

``ratio`` is the contender's mean predicted step (the dispatcher's, every stage at its
pipeline's bottleneck) over the mean lower bound (:mod:`hydraulis.cost.mixed_bound`); the
``exact_`` figures time the same plans by the exact staged schedule; ``step_ms``, ``exact_ms``
and the bounds are per held-out step.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hydraulis.artifacts.record import write_json
from hydraulis.simulation.mixed import MixedSimulation

KIND = "mixed_simulation"
SCHEMA_VERSION = 1


def mixed_simulation_to_dict(simulation: MixedSimulation, config: dict, created: str, tool_version: str,
                             command: str) -> dict:
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND,
        "config": config,
        "fastest_group": simulation.fastest_group,
        "planning_ms": simulation.planning_ms,
        "contenders": [{"name": r.contender.value, "strategy": r.strategy, "mean_ms": r.mean_ms,
                        "ratio": simulation.ratio(r), "exact_mean_ms": r.exact_mean_ms,
                        "exact_ratio": simulation.exact_ratio(r), "step_ms": list(r.step_ms),
                        "exact_ms": list(r.exact_ms)} for r in simulation.results],
        "bound": {"mean_ms": float(np.mean(simulation.bound_ms)), "work_ms": list(simulation.work_ms),
                  "longest_ms": list(simulation.longest_ms)},
        "created": created,
        "tool_version": tool_version,
        "command": command,
    }


def write_mixed_simulation(directory: str | Path, simulation: MixedSimulation, config: dict, created: str,
                           tool_version: str, command: str) -> Path:
    path = Path(directory) / "mixed_simulation.json"
    write_json(path, mixed_simulation_to_dict(simulation, config, created, tool_version, command))
    return path

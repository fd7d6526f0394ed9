"""Simulation at scale: propose once, plan every step with Hydraulis and with the baselines,
all on the same cost model (design §13). Pure apart from the clock and an optional progress
bar; :mod:`hydraulis.io.simulation_inputs` reads the inputs the CLI names.

* :mod:`.config` — :class:`SimulationConfig`;
* :mod:`.contenders` — the compared systems and their candidate strategies;
* :mod:`.simulate` — :func:`simulate`, the recipe;
* :mod:`.summary` — per-contender figures and Hydraulis' speed-up over each;
* :mod:`.compare` — one sampled step under every contender, with Hydraulis' 1F1B timelines;
* :mod:`.mixed` — the same on a mixed cluster (design §6.7).
"""

from hydraulis.simulation.compare import ContenderStep, StepComparison, compare_step
from hydraulis.simulation.config import SimulationConfig
from hydraulis.simulation.contenders import Contender, Family
from hydraulis.simulation.simulate import Communicators, Run, SimulatedStep, Simulation, StepOutcome, simulate
from hydraulis.simulation.summary import ContenderSummary, GapSummary, gap_summary, summarise

__all__ = [
    "Communicators",
    "Contender",
    "ContenderStep",
    "ContenderSummary",
    "Family",
    "GapSummary",
    "Run",
    "SimulatedStep",
    "Simulation",
    "SimulationConfig",
    "StepComparison",
    "StepOutcome",
    "compare_step",
    "gap_summary",
    "simulate",
    "summarise",
]

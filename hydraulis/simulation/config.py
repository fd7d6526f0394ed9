"""What a simulation is asked for: the planner's inputs, how many steps, how each is dispatched.

A :class:`SimulationConfig` is validated at construction; its :meth:`~SimulationConfig.to_dict`
is saved beside the simulation's outputs so they say what they were made from.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from hydraulis.base.errors import require
from hydraulis.base.limits import SAMPLED_STEPS, SYNTHESIS_EVALUATIONS
from hydraulis.dispatch import DispatchOptions
from hydraulis.dispatch.synthesis import Synthesise, SynthesisOptions
from hydraulis.planner import PlannerConfig

HELD_OUT_SEED_OFFSET = 1
"""The simulated steps are drawn with ``planner.seed + 1``: steps the planner did not see."""


@dataclass(frozen=True)
class SimulationConfig:
    """Inputs of :func:`hydraulis.simulation.simulate` besides the scheme space and the lengths.

    ``planner`` is the proposal's configuration (cluster, token budget ``T``, maximum length
    ``S``, strategies ``K``, the planner's own sampled steps and seed); ``steps`` is how many
    global batches are simulated, drawn by :attr:`step_seed` from the same documents and filled
    to the same budget; ``dispatch`` the per-step options (its seed orders equal lengths);
    ``synthesis`` which schemes Hydraulis may make a strategy of for each step
    (:mod:`hydraulis.dispatch.synthesis`) and ``synthesis_evaluations`` its budget per step.
    """

    planner: PlannerConfig
    steps: int = 100
    dispatch: DispatchOptions = field(default_factory=DispatchOptions)
    synthesis: Synthesise = Synthesise.PROPOSAL
    synthesis_evaluations: int = SynthesisOptions.evaluations

    def __post_init__(self) -> None:
        require(isinstance(self.planner, PlannerConfig), "planner", type(self.planner).__name__,
                "must be a PlannerConfig")
        SAMPLED_STEPS.check(self.steps, "steps")
        require(isinstance(self.dispatch, DispatchOptions), "dispatch", type(self.dispatch).__name__,
                "must be DispatchOptions")
        require(isinstance(self.synthesis, Synthesise), "synthesis", self.synthesis,
                f"must be one of {[m.value for m in Synthesise]}")
        SYNTHESIS_EVALUATIONS.check(self.synthesis_evaluations, "synthesis_evaluations")

    @property
    def step_seed(self) -> int:
        """Seed of the simulated steps: held out from the planner's sample."""
        return self.planner.seed + HELD_OUT_SEED_OFFSET

    def to_dict(self) -> dict:
        """The resolved configuration as plain JSON values."""
        dispatch = {**asdict(self.dispatch), "oversize": self.dispatch.oversize.value}
        return {"planner": self.planner.to_dict(), "steps": self.steps, "step_seed": self.step_seed,
                "dispatch": dispatch, "synthesis": self.synthesis.value,
                "synthesis_evaluations": self.synthesis_evaluations}

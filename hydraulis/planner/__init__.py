"""Strategy proposal (design §7): from a scheme space, a cluster and a length distribution, a few
heterogeneous strategies sharing one optimizer layout. Pure: no torch, no I/O.

:func:`propose` is the recipe (:mod:`.propose`); :func:`validate_proposal` checks any proposal
(:mod:`.validate`). Its steps: :mod:`.config`, :mod:`.layout` (the optimizer layout),
:mod:`.options`, :mod:`.distribution` (sampled steps), :mod:`.variants`, :mod:`.specialise`
(serving ranges), :mod:`.fluid` and :mod:`.program` (integer programs), :mod:`.search` judged by
:mod:`.evaluate`, :mod:`.differing`, :mod:`.report`; on mixed clusters :mod:`.split`,
:mod:`.mixed_options`, :mod:`.mixed`, :mod:`.mixed_propose` (design §7.4).
"""

from hydraulis.planner.config import PlannerConfig, SolverName, Variants
from hydraulis.planner.propose import propose
from hydraulis.planner.validate import Violation, proposal_violations, validate_proposal

__all__ = ["PlannerConfig", "SolverName", "Variants", "Violation", "propose", "proposal_violations",
           "validate_proposal"]

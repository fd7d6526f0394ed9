"""Strategy proposal (design §7): from a scheme space, a cluster and a length distribution, a few
heterogeneous strategies sharing one optimizer layout. Pure: no torch, no I/O.

:func:`propose` is the recipe (planner/propose.py); :func:`validate_proposal` checks any proposal.
"""

from hydraulis.planner.config import PlannerConfig, SolverName, Variants
from hydraulis.planner.propose import propose
from hydraulis.planner.validate import Violation, proposal_violations, validate_proposal

__all__ = ["PlannerConfig", "SolverName", "Variants", "Violation", "propose", "proposal_violations",
           "validate_proposal"]

"""The runtime's memory, accounted once (design §6.4): what one rank of a strategy keeps.

* :mod:`hydraulis.sharding.states` — model states per parameter element by role: compute weights
  and gradient buffers in the step's layout, master weights, reduced gradients and moments in
  the optimizer layout; element counts per rank (no torch);
* :mod:`hydraulis.sharding.activations` — what a stage keeps for its backward per token, per layer
  and per scheme option, and how many micro-batches 1F1B keeps in flight (no torch);
* :mod:`.report` — ``hydraulis memory``: every rank's bytes, computed by building its modules,
  gradient buffers, optimizer buffer and route on the ``meta`` device;
* :mod:`.peak` — a step's measured peak against ``--device-memory``.

The cost model (:mod:`hydraulis.cost.memory`) and the analytic scheme spaces
(:mod:`hydraulis.profiler.analytic`) take their bytes per parameter and per token from the same
pure modules, so the planner plans for this runtime.
"""

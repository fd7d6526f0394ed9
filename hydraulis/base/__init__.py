"""The base: the words every part speaks, one module per concept (``scheme``, ``specs``,
``space``, ``strategy``, ``step_plan``, ``segments``, ``stages``, ``placement``, ``workload``,
``cluster``, ``presets``; ``types`` re-exports them), the range of every number (``limits``),
the one error type, atomic files and folders, bisection, first-fit and the solver's work budget.
Pure (no torch) and the lowest layer: nothing here imports another hydraulis package.
"""

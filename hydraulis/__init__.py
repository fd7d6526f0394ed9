"""Hydraulis: plan and run Transformer training over variable-length data with dynamic
heterogeneous parallel strategies and two-stage data assignment.

Parts (one direction of data flow, one artifact per hand-off)::

    profiler ─► scheme space ─► planner ─► proposal ─► dispatch (every step) ─► runtime

The words are defined once, one module per concept (:mod:`hydraulis.scheme`, :mod:`hydraulis.specs`,
:mod:`hydraulis.space`, :mod:`hydraulis.strategy`, :mod:`hydraulis.step_plan`); :mod:`hydraulis.types`
is their glossary and re-exports them.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("hydraulis")
except PackageNotFoundError:
    __version__ = "0+unknown"

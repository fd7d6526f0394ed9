"""Hydraulis: plan and run Transformer training over variable-length data with dynamic
heterogeneous parallel strategies and two-stage data assignment.

Parts (one direction of data flow, one artifact per hand-off)::

    profiler ─► scheme space ─► planner ─► proposal ─► dispatch (every step) ─► runtime

The words are defined once, one module per concept (:mod:`hydraulis.base.scheme`, :mod:`hydraulis.base.specs`,
:mod:`hydraulis.base.space`, :mod:`hydraulis.base.strategy`, :mod:`hydraulis.base.step_plan`); :mod:`hydraulis.base.types`
is their glossary and re-exports them.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("hydraulis")
except PackageNotFoundError:
    __version__ = "0+unknown"

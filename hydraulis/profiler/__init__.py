"""Scheme spaces: measured on devices, derived analytically, or imported from the original
system's pools. Nothing here needs torch: the measuring jobs run on the runtime's own layers and
live with the runtime (its ``profiling`` package); this package plans their points and fits
what they measure.

===================  ====================================================================
module               concept
===================  ====================================================================
``profile``          ``hydraulis profile``: plan → cache → measure → fit → scheme space
``sweep``            the points of a profile: schemes, stage depths, token counts, mixes
``measurement``      a point's result and what it depends on
``fit``              non-negative least squares of time and memory, held-out quality
``compare``          two spaces' predicted micro-batch times side by side
``analytic``         a scheme space from device and model figures
``reference_pool``   import of the original system's strategy pools
``report``           a scheme space as rows
``segment``          segments: the points of stages measured alone, their fit and composition
``handoff``          the pipeline hand-off ``d`` from measured makespans
``budget``           a measured space under a device memory budget
``cluster``          one scheme space per device group of a mixed cluster
===================  ====================================================================
"""

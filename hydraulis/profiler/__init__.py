"""Scheme spaces' points and fits, measured on devices (the run: :mod:`hydraulis.io.profile_run`)
or derived analytically. Nothing here needs torch: the measuring jobs run on the runtime's own layers and
live with the runtime (its ``profiling`` package); this package plans their points and fits
what they measure.

===================  ====================================================================
module               concept
===================  ====================================================================
``sweep``            the points of a profile: schemes, stage depths, token counts, mixes
``measurement``      a point's result and what it depends on
``fit``              non-negative least squares of time and memory, held-out quality
``compare``          two spaces' predicted micro-batch times side by side
``analytic``         a scheme space from device and model figures
``segment``          segments: the points of stages measured alone, their fit and composition
``handoff``          the pipeline hand-off ``d`` from measured makespans
``budget``           a measured space under a device memory budget
``cluster``          one scheme space per device group of a mixed cluster
===================  ====================================================================
"""

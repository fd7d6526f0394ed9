"""A training job as data (no torch): what ``hydraulis train`` is asked to do and what it leaves
behind, readable and checkable without starting the runtime.

==================  ===========================================================================
module              concept
==================  ===========================================================================
``config``          the job's configuration, frozen and validated
``strategy_spec``   the ``cp,tp,pp[:L1/…][[sp,recompute=…]][xN]+…`` SPEC syntax
``staged_profile``  a SPEC's time coefficients: analytic, or from a scheme space
``records``         step records, the log line, the table and the summary
``manifest``        what a checkpoint holds
``schedule``        learning-rate schedules, keyed by updates applied
``overlap``         how much of a step's reduction ran under the same rank's backward
``memory_report``   what ``hydraulis memory`` reports
==================  ===========================================================================
"""

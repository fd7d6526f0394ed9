"""Parallel layers of one pipeline: tensor (:mod:`.tensor`), sequence (:mod:`.sequence`), context
(:mod:`.context`) and pipeline (:mod:`.pipeline`) parallelism over :class:`.group.ParallelGroup`
handles."""

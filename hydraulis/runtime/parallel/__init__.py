"""Parallel layers of one pipeline: tensor (:mod:`.tensor`, the column layers' fused backward in
:mod:`.columns`), sequence (:mod:`.sequence`), context (:mod:`.context`) and pipeline
(:mod:`.pipeline`, its operations recorded by :mod:`.operations`) parallelism over
:class:`.group.ParallelGroup` handles."""

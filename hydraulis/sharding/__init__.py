"""Sharding and its accounting (no torch): how a strategy shards the model over ranks and what each
rank holds. Everything above — cost model, planner, dispatch, profiler, runtime — takes these
facts from here, so the planner plans for exactly what the runtime builds.

=======================  ======================================================================
module                   concept
=======================  ======================================================================
``kinds``                device, precision, gradient-reduction dtype, optimizer kind
``pipeline``             a pipeline's stages as contiguous layer ranges; a strategy as run
``parameters``           canonical parameters and each rank's compute shards
``ranges``               regions of parameters and the strided blocks two regions share
``ownership``            who owns which region of which parameter in the optimizer layout
``states``               model-state bytes and elements per rank, by role
``activations``          what a stage keeps per token for its backward; micro-batches in flight
``buckets``              a stage's gradient shards grouped for the overlapped reduction
=======================  ======================================================================

How layers split over stages is :func:`hydraulis.base.stages.even_split` (one owner, below this
package); where a rank sits in a pipeline is :mod:`hydraulis.base.placement`.
"""

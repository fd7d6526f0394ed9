"""The PyTorch runtime that executes step plans (design §9): any strategy per step, one optimizer
layout (ZeRO-1) the weights go out of and the gradients come back into; gloo on CPU, NCCL on CUDA.
Pure parts live below it: :mod:`hydraulis.sharding` (what a rank holds), :mod:`hydraulis.job`.

``run`` config → what every rank needs · ``launch`` local processes or torchrun · ``heartbeat``
naming a stopped rank · ``rank_map`` rank → pipeline, stage, cp, tp rank; groups by rank set ·
``data`` batches to a token budget · ``planning`` plans one step ahead (``planner_client`` asks a service) · ``broadcast`` rank 0's
plan to all · ``step`` one training step on one rank · ``gradients`` fp32 accumulation and bucket
readiness · ``trainer`` the loop · ``tensorboard`` its scalars · ``reference`` the single-process
reference run · ``equivalence`` distributed against it.
Packages: ``model`` the decoder stage and its attention · ``parallel`` tp, sp, cp, pp ·
``optimizer`` owners' buffers, routes, exchange, clipping · ``checkpoint`` store, writer, resume,
Hugging Face import/export · ``memory`` bytes per rank, measured peak · ``profiling`` the
profiler's measuring jobs.
"""

"""A scheme space under a device memory budget: the memory a training run enforces (``hydraulis
train --device-memory``) as the planner's device memory.

A CPU has memory to spare, so nothing limits which scheme holds which sequence, and a plan for
it is homogeneous. Under a budget ``M`` per process the longest sequence of a scheme is
(:mod:`hydraulis.cost.memory`)::

    S_max = max {T : A(T) ≤ M − safety − states − g_max}      (A(T) = m_tok·T with the whole loss)

with every term the quantity the runtime's meter counts (the runtime's ``memory.peak``:
tensor storage, not the process): the model states of the runtime's accounting at the device's
precision (:func:`~hydraulis.profiler.analytic.analytic_memory_model`), ``m_tok`` the runtime's
activation accounting of the scheme's most loaded stage (what the analytic profile of the scheme
holds: the micro-batches 1F1B keeps in flight and one micro-batch's working set; ``A(T)`` that
accounting with the runtime's loss in chunks, :func:`~hydraulis.cost.memory.activation_curve`), no runtime
overhead (the interpreter and libraries are not tensor storage), ``g_max`` one parameter's
gradient before it is accumulated (:mod:`hydraulis.sharding.step_memory`). Times, fit and provenance of
the measured space are kept; the provenance's command gains the budget.

Worked example, the ``tiny`` model in fp32 on 4 CPU processes under ``M = 24 MB`` and a 1 MB
safety margin: (1,1,1) keeps about 32 kB per token and holds ≈ 0.6 k tokens, (2,1,1) (half the
tokens per rank) about twice as many (``hydraulis space show`` lists them).
"""

from __future__ import annotations

from dataclasses import replace

from hydraulis.base.errors import require_int
from hydraulis.base.presets import device_preset
from hydraulis.base.types import SchemeSpace
from hydraulis.profiler.analytic import analytic_memory_model, analytic_profile


def under_budget(space: SchemeSpace, device_memory_bytes: int, safety_margin_bytes: int) -> SchemeSpace:
    """``space`` with devices of ``device_memory_bytes`` as the runtime counts them (module docstring)."""
    require_int(device_memory_bytes, "device_memory", minimum=1)
    require_int(safety_margin_bytes, "safety_margin", minimum=0, maximum=device_memory_bytes - 1)
    device = device_preset(space.cluster.device)
    memory = replace(analytic_memory_model(space.model, device, device_memory_bytes),
                     safety_margin_bytes=safety_margin_bytes)
    profiles = tuple(
        replace(profile, overhead_bytes=0, activation_bytes_per_token=analytic_profile(
            space.model, device, space.cluster, profile.scheme).activation_bytes_per_token)
        for profile in space.profiles)
    command = (f"{space.provenance.command}; hydraulis space budget --device-memory {device_memory_bytes} "
               f"--safety-margin {safety_margin_bytes}")
    return replace(space, memory=memory, profiles=profiles, provenance=replace(space.provenance, command=command))

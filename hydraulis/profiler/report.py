"""A scheme space as rows: what ``space show`` prints and the service returns."""

from __future__ import annotations

from hydraulis.cost import scheme_capacities
from hydraulis.types import OptimizerLayout, SchemeSpace


def space_rows(space: SchemeSpace, layout: OptimizerLayout) -> list[dict]:
    """One dict per scheme: ``cp, tp, pp, options`` (e.g. ``["sp", "recompute=full"]``),
    ``devices, a, b, c, max_seq_len, limit``, the model-state bytes and activation bytes per token
    under ``layout``."""
    return [
        {
            "cp": c.profile.scheme.cp, "tp": c.profile.scheme.tp, "pp": c.profile.scheme.pp,
            "options": list(c.profile.scheme.options),
            "devices": c.profile.scheme.devices,
            "a": c.profile.time.a, "b": c.profile.time.b, "c": c.profile.time.c,
            "max_seq_len": c.max_seq_len, "limit": c.memory.limit.value,
            "states_bytes": c.memory.states,
            "activation_bytes_per_token": c.profile.activation_bytes_per_token,
        }
        for c in scheme_capacities(space, layout)
    ]

"""One scheme's profile: the fitted time coefficients of a micro-batch on one stage, how well
they fit, and the scheme's memory terms (design §6). A scheme space (:mod:`hydraulis.space`)
holds one per scheme; segments (:mod:`hydraulis.segments`) compose them. Re-exported by
:mod:`hydraulis.types`.
"""

from __future__ import annotations

from dataclasses import dataclass

from hydraulis.errors import require, require_int, require_number
from hydraulis.scheme import Scheme


@dataclass(frozen=True)
class TimeCoefficients:
    """Time of one micro-batch on one pipeline stage, forward + backward, in ms (design §6):
    ``t(mb) = c + Σ_i (a·s_i² + b·s_i)``."""

    a: float
    b: float
    c: float

    def __post_init__(self) -> None:
        for name in ("a", "b", "c"):
            require_number(getattr(self, name), name, minimum=0.0)


@dataclass(frozen=True)
class FitQuality:
    """How well fitted coefficients predict measurements held out of the fit."""

    r2: float
    median_rel_error: float
    max_rel_error: float
    points: int


@dataclass(frozen=True)
class SchemeProfile:
    """What the planner knows about one scheme.

    ``activation_bytes_per_token`` is the activation memory per token of a micro-batch on the
    most loaded device (under 1F1B the first stage keeps ``pp`` micro-batches of ``L/pp``
    layers, so it is the whole model's per-token activation divided by ``tp·cp``);
    ``overhead_bytes`` the fixed runtime overhead per device (context, communicator buffers);
    ``utilization_tokens`` the smallest micro-batch that keeps a device busy (0: unknown).
    """

    scheme: Scheme
    time: TimeCoefficients
    activation_bytes_per_token: float
    overhead_bytes: int
    utilization_tokens: int = 0
    fit: FitQuality | None = None

    def __post_init__(self) -> None:
        value = require_number(self.activation_bytes_per_token, "activation_bytes_per_token")
        require(value > 0, "activation_bytes_per_token", value, "must be > 0")
        require_int(self.overhead_bytes, "overhead_bytes", minimum=0)
        require_int(self.utilization_tokens, "utilization_tokens", minimum=0)

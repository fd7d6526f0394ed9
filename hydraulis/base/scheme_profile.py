"""One scheme's profile: the fitted time coefficients of a micro-batch on one stage, how well
they fit, and the scheme's memory terms (design §6). A scheme space (:mod:`hydraulis.base.space`)
holds one per scheme; segments (:mod:`hydraulis.base.segments`) compose them. Re-exported by
:mod:`hydraulis.base.types`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hydraulis.base.errors import require, require_int, require_number
from hydraulis.base.scheme import Scheme


def time_ms(a, b, c, squares, tokens, micro_batches=1):
    """``a·Σs² + b·Σs + c·n``: ``n`` micro-batches on one stage whose sequences' squared lengths
    sum to ``squares`` and lengths to ``tokens`` — the one spelling of the micro-batch time
    (:class:`TimeCoefficients`), element-wise over numbers or NumPy arrays (the coefficients of
    many schemes broadcast against many sequences)."""
    return a * squares + b * tokens + c * micro_batches


def sequence_work_ms(a, b, lengths):
    """``a·s² + b·s`` of every sequence, element-wise: no fixed term (``a``, ``b`` may be columns
    of many schemes' coefficients, ``lengths`` a row)."""
    s = np.asarray(lengths, dtype=np.float64)
    return time_ms(a, b, 0.0, s * s, s, 0)


@dataclass(frozen=True)
class TimeCoefficients:
    """Time of one micro-batch on one pipeline stage, forward + backward, in ms (design §6):

        t(mb) = c + Σ_{i ∈ mb} (a·s_i² + b·s_i)

    The quadratic term is attention (causal, per document: packed documents never attend to each
    other), the linear term the dense layers, ``c`` a fixed per-micro-batch overhead. Every
    caller prices through these methods (:func:`time_ms` is the formula). Worked example, the
    reference LLaMA-7B pool's scheme (1,2,2) (``a = 1.0266e-6``, ``b = 0.04907``, ``c = 31.87``):
    8,192 + 2 × 1,024 tokens take ``31.87 + 1.0266e-6·(8192² + 2·1024²) + 0.04907·10240 ≈ 605.4`` ms."""

    a: float
    b: float
    c: float

    def __post_init__(self) -> None:
        for name in ("a", "b", "c"):
            require_number(getattr(self, name), name, minimum=0.0)

    def microbatch_ms(self, lengths: Sequence[int] | np.ndarray) -> float:
        """``t(mb)`` of one micro-batch holding sequences of ``lengths``."""
        s = np.asarray(lengths, dtype=np.float64)
        return float(self.moments_ms(float(s @ s), float(s.sum())))

    def sequence_ms(self, length):
        """``c + a·s² + b·s``: one sequence (a number or a NumPy array of them) as its own micro-batch."""
        return self.moments_ms(length * length, length)

    def work_ms(self, lengths) -> np.ndarray:
        """``a·s² + b·s`` of every sequence, element-wise (no fixed term)."""
        return sequence_work_ms(self.a, self.b, lengths)

    def moments_ms(self, squares, tokens, micro_batches=1):
        """``a·Σs² + b·Σs + c·n`` from the sums (:func:`time_ms`)."""
        return time_ms(self.a, self.b, self.c, squares, tokens, micro_batches)


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

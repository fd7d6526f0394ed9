"""Learning-rate schedules: the learning rate of each optimizer update (no torch here).

Update ``k`` (0 for the first update the job applies; a skipped step applies none, so it does
not advance ``k``) of a job of ``K`` steps, peak rate ``η``, floor ``η_min`` and ``W`` warmup
updates uses::

    k < W:    η_k = η · (k + 1) / W                                  (linear warmup)
    k ≥ W:    p   = (k − W) / max(1, K − W)                          (progress of the decay, 0 … < 1)
              constant:  η_k = η
              linear:    η_k = η_min + (η − η_min) · (1 − p)
              cosine:    η_k = η_min + (η − η_min) · (1 + cos(π·p)) / 2

Warmup starts at ``η/W``, not 0, so no update is wasted; the decay starts from ``η`` at the end
of warmup and reaches ``η_min`` one update after the last. The rate is a function of ``k``
alone, so a job resumed from a checkpoint (which records ``k``, :mod:`hydraulis.job.manifest`)
continues the schedule exactly, under any strategy, as long as it asks for the same ``K`` (a job
extended by resuming with more steps decays over the new ``K`` from there on); ``η_k / η`` is what
``torch.optim.lr_scheduler.LambdaLR`` takes as its factor.

Worked example: cosine, ``η`` = 1e-3, ``η_min`` = 1e-4, ``W`` = 2, ``K`` = 6::

    k    0       1       2       3        4       5
    η_k  5.0e-4  1.0e-3  1.0e-3  8.68e-4  5.5e-4  2.32e-4
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from hydraulis.base.errors import require, require_int, require_number


class LrScheduleKind(str, Enum):
    CONSTANT = "constant"
    LINEAR = "linear"
    COSINE = "cosine"


@dataclass(frozen=True)
class LrSchedule:
    """The module docstring's schedule: ``kind`` over ``steps`` (``K``) updates after
    ``warmup_steps`` (``W``, at most ``K`` in a job that trains: :class:`~hydraulis.job.config.TrainConfig`
    checks it), from ``lr`` (``η``) down to ``min_lr`` (``η_min``)."""

    kind: LrScheduleKind
    lr: float
    steps: int
    warmup_steps: int = 0
    min_lr: float = 0.0

    def __post_init__(self) -> None:
        require(isinstance(self.kind, LrScheduleKind), "lr_schedule", self.kind,
                f"must be one of {[k.value for k in LrScheduleKind]}")
        require(require_number(self.lr, "lr") > 0, "lr", self.lr, "must be > 0")
        require_int(self.steps, "steps", minimum=0)
        require_int(self.warmup_steps, "warmup_steps", minimum=0)
        require(0 <= require_number(self.min_lr, "min_lr") <= self.lr, "min_lr", self.min_lr,
                f"must be between 0 and lr = {self.lr:g}")

    def factor(self, update: int) -> float:
        """``η_k / η`` for update ``k`` = ``update``."""
        if update < self.warmup_steps:
            return (update + 1) / self.warmup_steps
        if self.kind is LrScheduleKind.CONSTANT:
            return 1.0
        progress = (update - self.warmup_steps) / max(1, self.steps - self.warmup_steps)
        shape = 1.0 - progress if self.kind is LrScheduleKind.LINEAR else (1.0 + math.cos(math.pi * progress)) / 2
        floor = self.min_lr / self.lr
        return floor + (1.0 - floor) * shape

    def lr_at(self, update: int) -> float:
        """``η_k`` for update ``k`` = ``update``."""
        return self.lr * self.factor(update)

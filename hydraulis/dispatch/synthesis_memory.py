"""What per-step synthesis (:mod:`hydraulis.dispatch.synthesis`) carries from one step to the
next: the strategies it planned lately, each with how far its last plan was from its fluid
estimate, the latest winner first.

Consecutive steps draw from the same documents, so a strategy that won a step is a good start
for the next, and its ratio ``κ = plan / E`` (the dispatcher's predicted compute and reduction
over the fluid estimate :func:`hydraulis.dispatch.fluid_estimate.fluid_step_ms`) corrects the
estimate for what the fluid program leaves out (whole pieces, micro-batch rounding). Worked
example: a strategy planned at 1,761 ms against ``E`` = 1,650 ms is remembered with ``κ`` =
1.067; next step, at ``E`` = 1,600 ms, it is ranked at 1,707 ms plus its switch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hydraulis.base.errors import require, require_number
from hydraulis.base.types import Strategy

MEMORY_SIZE = 8
"""Strategies remembered between steps."""


@dataclass(frozen=True)
class Remembered:
    """A strategy planned on an earlier step and its ratio ``κ`` (module docstring)."""

    strategy: Strategy
    ratio: float

    def __post_init__(self) -> None:
        require(require_number(self.ratio, "remembered.ratio") > 0, "remembered.ratio", self.ratio, "must be > 0")


@dataclass(frozen=True)
class SynthesisMemory:
    """The strategies earlier steps planned, the latest winner first, at most ``size``."""

    entries: tuple[Remembered, ...] = ()
    size: int = MEMORY_SIZE

    def __post_init__(self) -> None:
        require(isinstance(self.size, int) and self.size >= 1, "synthesis_memory.size", self.size, "must be ≥ 1")
        require(len(self.entries) <= self.size, "synthesis_memory.entries", len(self.entries),
                f"must be at most size {self.size}")

    def after(self, planned: Sequence[Remembered], winner: Strategy | None) -> SynthesisMemory:
        """The memory after a step that planned ``planned`` and ran ``winner`` (None: a
        proposal strategy): entries replaced by their new ratios, new ones after the old, the
        winner moved first, cut to ``size`` from the end (a strategy that does not win drifts
        there and is forgotten)."""
        fresh = {r.strategy: r for r in planned}
        kept = [fresh.pop(r.strategy, r) for r in self.entries] + list(fresh.values())
        kept.sort(key=lambda r: r.strategy != winner)
        return SynthesisMemory(tuple(kept[:self.size]), self.size)

"""What a profile measures: schemes, stage depths and packed micro-batches (no torch here).

A **point** is one packed micro-batch (a mix of sequence lengths) run forward + backward on one
pipeline stage of one scheme, the stage holding ``depth`` decoder layers. The time model of a
stage (design §6) is ``t = c + Σ_i (a·s_i² + b·s_i)``; to tell ``a`` from ``b`` the points
vary both the micro-batch's tokens ``T = Σ s_i`` and, at equal ``T``, ``Σ s_i²``: every token
count ``T`` of the sweep is measured as these mixes (:data:`MIXES`)::

    one       (T)                      Σs² = T²
    halves    (T/2, T/2)               Σs² = T²/2
    skewed    (T/2, T/4, T/8, T/8)     Σs² ≈ 0.34·T²
    quarters  (T/4, T/4, T/4, T/4)     Σs² = T²/4

The details: :func:`sweep_plan`."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

import numpy as np

from hydraulis.base.errors import HydraulisError, require, require_int
from hydraulis.base.limits import MAX_SEQ_LEN, TOKEN_COUNTS
from hydraulis.base.types import ModelSpec, Scheme, SchemeOptions

MIXES: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("one", (1,)),
    ("halves", (2, 2)),
    ("skewed", (2, 4, 8, 8)),
    ("quarters", (4, 4, 4, 4)),
)
"""Each mix as the denominators of its pieces: piece ``i`` is ``T/d_i`` tokens."""

MIN_PIECE = 8
"""Shortest sequence of a mix, in tokens."""


class Statistic(str, Enum):
    """What a point's time is made of its samples (every timed micro-batch's slowest-rank
    forward + backward, the runtime's ``profiling.measure``)."""

    MIN = "min"
    """The fastest sample: on a shared machine other work only ever adds time to a sample
    (preemption, caches and memory bandwidth taken, page faults), so the minimum is the sample
    least disturbed and the most repeatable figure (the advice of Python's ``timeit``)."""
    MEDIAN = "median"
    """The lower median of the samples: the typical sample, disturbances included."""

    def index(self, samples: np.ndarray) -> int:
        """The position in ``samples`` of the sample this statistic picks."""
        if self is Statistic.MIN:
            return int(np.argmin(samples))
        return int(np.argsort(samples, kind="stable")[(len(samples) - 1) // 2])


class Interleave(str, Enum):
    """Which points share the measuring rounds (the runtime's ``profiling.measure``): in each round
    every point of the group runs once, so a load that drifts while the group is measured weighs
    on its points alike."""

    SCHEME = "scheme"
    """One scheme's points; each scheme is appended to the cache when its last round ends, so a
    killed sweep or a point out of memory costs at most the scheme being measured."""
    SWEEP = "sweep"
    """Every point of the job: schemes measured in the same minutes, so that drift of the
    machine's speed does not tell them apart; the job's points are appended when it ends."""


class PointRole(str, Enum):
    FIT = "fit"
    """Measured at a block depth, used by the fit (some held out to judge it)."""
    CHECK = "check"
    """Measured on the full stage, only to report the block's extrapolation error."""


@dataclass(frozen=True)
class SweepPoint:
    """One measurement: ``scheme``'s stage of ``depth`` layers running one micro-batch of
    sequences ``lengths`` — every stage of a pipeline of the scheme at once, or with ``stage``
    set only that stage of a pipeline laid out as ``stage_layers``, alone on ``cp·tp`` ranks
    (its neighbours' hand-offs stood in for: :mod:`hydraulis.profiler.segment`)."""

    scheme: Scheme
    depth: int
    lengths: tuple[int, ...]
    role: PointRole = PointRole.FIT
    stage: int | None = None
    stage_layers: tuple[int, ...] = ()

    @property
    def tokens(self) -> int:
        return sum(self.lengths)

    @property
    def rank_scheme(self) -> Scheme:
        """The degrees of the ranks the point runs on: the scheme's, or one stage's ``(cp, tp, 1)``
        (recomputation changes no rank or group)."""
        return Scheme(self.scheme.cp, self.scheme.tp, self.scheme.pp if self.stage is None else 1, self.scheme.sp)


@dataclass(frozen=True)
class SkippedScheme:
    scheme: Scheme
    reason: str


@dataclass(frozen=True)
class SweepConfig:
    """The degrees, token counts and repetitions of a profile.

    ``max_procs`` is the number of local processes (one per device) a scheme may use;
    ``block_layers`` the repeated unit ``K``; ``warmup`` runs are discarded, ``statistic`` (the
    minimum by default) is taken over the micro-batches of ``repeats`` runs, ``interleave`` says
    which points share the measuring rounds. Every ``(cp, tp, pp)`` is measured under each of ``variants``
    (sequence parallelism, recomputation): each variant is a scheme of its own (an ``sp``
    variant only where ``tp > 1``).
    """

    model: ModelSpec
    cps: tuple[int, ...]
    tps: tuple[int, ...]
    pps: tuple[int, ...]
    token_counts: tuple[int, ...]
    max_procs: int
    repeats: int = 3
    warmup: int = 1
    block_layers: int = 1
    check_full_stage: bool = False
    variants: tuple[SchemeOptions, ...] = (SchemeOptions(),)
    statistic: Statistic = Statistic.MIN
    interleave: Interleave = Interleave.SCHEME

    def __post_init__(self) -> None:
        require(isinstance(self.interleave, Interleave), "interleave", self.interleave,
                f"must be one of {[i.value for i in Interleave]}")
        for name in ("cps", "tps", "pps"):
            values = getattr(self, name)
            require(len(values) > 0, name[:-1], list(values), "must list at least one degree")
            for value in values:
                require_int(value, name[:-1], minimum=1)
        require(len(self.token_counts) > 0, "seq_lens", [], "must list at least one token count")
        for count in self.token_counts:
            require_int(count, "seq_lens", minimum=MIN_PIECE)
        require_int(self.max_procs, "max_procs", minimum=1)
        require_int(self.repeats, "repeats", minimum=1)
        require_int(self.warmup, "warmup", minimum=0)
        require_int(self.block_layers, "block_layers", minimum=1)
        require(len(self.variants) > 0, "options", [], "must list at least one variant")
        for cp, tp, pp in itertools.product(self.cps, self.tps, self.pps):
            self.model.check_scheme(Scheme(cp, tp, pp))


@dataclass(frozen=True)
class SweepPlan:
    """Every point of a profile in measuring order (scheme, depth, tokens, mix), and the
    schemes left out with the reason."""

    points: tuple[SweepPoint, ...]
    schemes: tuple[Scheme, ...]
    skipped: tuple[SkippedScheme, ...]


def sweep_plan(config: SweepConfig) -> SweepPlan:
    """The points of ``config`` (:func:`sweep_plan`); schemes needing more than ``max_procs``
    processes are skipped. Raises when none is left.

    (a mix whose shortest piece would be under :data:`MIN_PIECE` tokens is left out).

    **Representative block.** A stage of ``L_s = ⌈L/pp⌉`` layers is a repeated unit (one decoder
    layer) plus its ends (embedding, final norm, head, loss, fixed costs). Instead of the whole
    stage the profiler measures stages of ``K`` and ``2K`` layers (``K = block_layers``) and fits
    ``t(d) = t_ends + d·t_unit`` (:mod:`hydraulis.profiler.fit`), extrapolated to ``d = L_s``;
    when ``L_s ≤ 2K`` it measures the stage itself. With ``check_full_stage`` it also measures the
    full stage — one mix per token count, in turn, held out of every fit — to report the
    extrapolation error.

    Worked example, ``tiny`` (L = 4), K = 1, token counts (64, 128): scheme (1,1,1) measures depths
    1 and 2 (4 mixes × 2 counts each) and, checking, depth 4 (``one`` at 64, ``halves`` at 128);
    scheme (1,1,2) has ``L_s = 2 ≤ 2K`` and measures depth 2 only.
    """
    schemes, skipped = local_schemes(config, (variant.scheme(cp, tp, pp) for cp, tp, pp in sweep_degrees(config)
                                              for variant in dict.fromkeys(config.variants) if tp > 1 or not variant.sp))
    points = []
    for scheme in schemes:
        stage = stage_layers(config.model, scheme)
        depths = block_depths(stage, config.block_layers)
        roles = [(d, PointRole.FIT) for d in depths]
        if config.check_full_stage and stage not in depths:
            roles.append((stage, PointRole.CHECK))
        for depth, role in roles:
            for i, tokens in enumerate(sorted(set(config.token_counts))):
                mixes = length_mixes(tokens)
                chosen = mixes if role is PointRole.FIT else (mixes[i % len(mixes)],)
                points += [SweepPoint(scheme, depth, lengths, role) for lengths in chosen]
    return SweepPlan(tuple(points), tuple(schemes), tuple(skipped))


def stage_layers(model: ModelSpec, scheme: Scheme) -> int:
    """``L_s = ⌈L/pp⌉``: the most layers a stage of the even split holds."""
    return math.ceil(model.layers / scheme.pp)


def block_depths(stage: int, block_layers: int) -> tuple[int, ...]:
    """``(K, 2K)`` when the stage has more than ``2K`` layers, else the stage itself."""
    return (block_layers, 2 * block_layers) if stage > 2 * block_layers else (stage,)


def length_mixes(tokens: int) -> tuple[tuple[int, ...], ...]:
    """The mixes of :data:`MIXES` for ``tokens``; rounding remainders go to the first piece."""
    mixes = []
    for _, denominators in MIXES:
        pieces = [tokens // d for d in denominators]
        if min(pieces) < MIN_PIECE:
            continue
        pieces[0] += tokens - sum(pieces)
        mixes.append(tuple(pieces))
    return tuple(mixes)


_RANGE = re.compile(r"^(\d+):(\d+)(?::(\d+))?$")


def parse_token_counts(text: str) -> tuple[int, ...]:
    """``--seq-lens``: a list ``64,128,512``, a doubling range ``64:1024`` (64, 128, …, 1024)
    or a stepped range ``128:512:128`` (128, 256, 384, 512)."""
    text = "".join(text.split())
    match = _RANGE.match(text)
    if match:
        start, stop, step = int(match[1]), int(match[2]), match[3]
        require(start >= 1 and stop >= start, "seq_lens", text, "must be START:STOP with 1 <= START <= STOP")
        MAX_SEQ_LEN.check(stop, "seq_lens")
        if step is not None:
            TOKEN_COUNTS.check((stop - start) // max(int(step), 1) + 1, "seq_lens (token counts)")
        if step is None:
            values = [start * 2**i for i in range(int(math.log2(stop / start)) + 1)]
        else:
            require(int(step) >= 1, "seq_lens", text, "must have a step >= 1")
            values = list(range(start, stop + 1, int(step)))
    else:
        try:
            values = [int(v) for v in text.split(",") if v]
        except ValueError:
            raise HydraulisError("seq_lens", text, "must be a list 64,128 or a range 64:1024[:STEP]") from None
    require(bool(values), "seq_lens", text, "must name at least one token count")
    TOKEN_COUNTS.check(len(values), "seq_lens (token counts)")
    for value in values:
        require(value >= MIN_PIECE, "seq_lens", value, f"must be >= {MIN_PIECE} tokens")
        MAX_SEQ_LEN.check(value, "seq_lens")
    return tuple(sorted(set(values)))


def local_schemes(config: SweepConfig, candidates: Iterable[Scheme]) -> tuple[list[Scheme], list[SkippedScheme]]:
    """``candidates`` that fit ``max_procs`` local processes, and the others with the reason;
    raises when none fits."""
    schemes, skipped = [], []
    for scheme in candidates:
        if scheme.devices > config.max_procs:
            skipped.append(SkippedScheme(scheme, f"needs {scheme.devices} devices, only {config.max_procs} here"))
        else:
            schemes.append(scheme)
    require(bool(schemes), "schemes", [str(s.scheme) for s in skipped],
            f"all need more than the {config.max_procs} local devices")
    return schemes, skipped


def sweep_degrees(config: SweepConfig) -> Iterable[tuple[int, int, int]]:
    """Every ``(cp, tp, pp)`` of the sweep, in order."""
    return itertools.product(sorted(set(config.cps)), sorted(set(config.tps)), sorted(set(config.pps)))


def points_by_scheme(points: Iterable[SweepPoint]) -> dict[Scheme, list[SweepPoint]]:
    """Points grouped by the scheme of the ranks they run on, in order of first appearance."""
    grouped: dict[Scheme, list[SweepPoint]] = {}
    for point in points:
        grouped.setdefault(point.rank_scheme, []).append(point)
    return grouped


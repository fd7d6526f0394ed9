"""Scheme variants: per scheme and per longest sequence, the fastest variant that holds it.

Inside a scheme ``(cp, tp, pp)`` sequence parallelism and recomputation trade time for
activation memory, and memory decides the longest sequence a scheme holds (design §6.4, §7.2). A
space with segments (:mod:`hydraulis.base.segments`) composes any variant: ``sp`` (``tp > 1``),
``selective`` recomputation, or ``k_σ`` of stage ``σ``'s ``L_σ`` layers recomputed in full —
stages of one pipeline may differ, as 1F1B keeps ``pp − σ`` micro-batches in flight on stage
``σ``. For a longest sequence ``h`` and a work ``W`` (a step's ``Σs²``, ``Σs`` and
micro-batches: time ``W(t) = a·Σs² + b·Σs + c·n``) the planner wants

    v*(h) = argmin { W(t_v) : variant v of the scheme with S_v ≥ h }

The details: :func:`choose_variants`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from hydraulis.base.errors import HydraulisError
from hydraulis.base.segments import Segments, in_flight_bytes_per_token, max_time, stage_block
from hydraulis.base.stages import even_split
from hydraulis.base.types import (
    OptimizerLayout,
    ProposedStrategy,
    Recompute,
    Scheme,
    SchemeProfile,
    SchemeSpace,
    TimeCoefficients,
)
from hydraulis.cost import memory_breakdown
from hydraulis.planner.config import Variants
from hydraulis.planner.distribution import StepStatistics


@dataclass(frozen=True)
class Work:
    """What the variants of a scheme are compared on: ``Σs²``, ``Σs`` and micro-batches ``n``."""

    squares: float
    tokens: float
    micro_batches: float

    @classmethod
    def sequence(cls, length: int) -> Work:
        """One sequence of ``length`` tokens in one micro-batch."""
        return cls(float(length) ** 2, float(length), 1.0)

    def ms(self, time: TimeCoefficients) -> float:
        return time.moments_ms(self.squares, self.tokens, self.micro_batches)


@dataclass(frozen=True)
class VariantChoice:
    """The variant chosen for scheme ``plain`` and longest sequence ``longest``, its capacity
    and its time on the work compared, beside the plain scheme's."""

    plain: SchemeProfile
    profile: SchemeProfile
    longest: int
    capacity: int
    plain_capacity: int
    time_ms: float
    plain_time_ms: float
    stage_layers: tuple[int, ...]

    @property
    def scheme(self) -> Scheme:
        return self.profile.scheme

    def reason(self) -> str:
        """Why this variant, in a sentence."""
        scheme = self.scheme
        what = []
        if scheme.sp:
            what.append("sequence parallelism")
        if scheme.recompute is Recompute.SELECTIVE:
            what.append("recomputing the attention core")
        elif scheme.recompute is Recompute.FULL:
            counts = "/".join(f"{scheme.full_layers(s, n)} of {n}" for s, n in enumerate(self.stage_layers))
            what.append(f"recomputing {counts} layers per stage in full")
        return (f"{scheme} uses {' and '.join(what)} to hold {self.longest} tokens (holds {self.capacity}; plain "
                f"{self.plain.scheme} holds {self.plain_capacity}), at {self.time_ms / self.plain_time_ms - 1:+.1%} "
                f"time on the mean step it was chosen for")


def choose_variant(space: SchemeSpace, layout: OptimizerLayout, plain: SchemeProfile, longest: int,
                   work: Work) -> VariantChoice | None:
    """``v*(longest)`` of :func:`choose_variants` for ``plain``'s degrees, None when no variant
    holds ``longest`` (or the space has no segments for them)."""
    free = memory_breakdown(space.memory, space.model, plain, layout, space.cluster.devices).free_for_activations
    if free <= 0:
        return None
    best: tuple[float, SchemeProfile] | None = None
    for sp in (False, True):
        segments = space.segments_of(plain.scheme.cp, plain.scheme.tp, sp)
        if segments is None:
            continue
        for scheme in _candidates(space, segments, plain.scheme, free, longest):
            profile = space.profile(scheme)
            time_ms = work.ms(profile.time)
            if best is None or time_ms < best[0]:
                best = time_ms, profile
    if best is None:
        return None
    return VariantChoice(plain, best[1], longest, capacity(free, best[1]), capacity(free, plain), best[0],
                         work.ms(plain.time), even_split(space.model.layers, plain.scheme.pp))


def capacity(free: float, profile: SchemeProfile) -> int:
    """``S_v = ⌊free / m_v⌋``: the longest sequence ``profile`` holds with ``free`` bytes."""
    return max(0, math.floor(free / profile.activation_bytes_per_token))


def _candidates(space: SchemeSpace, segments: Segments, plain: Scheme, free: float, longest: int) -> list[Scheme]:
    """The (at most two) variants with ``segments``' sp that hold ``longest``: the fewest full
    layers per stage, and selective recomputation (:func:`choose_variants`)."""
    split = even_split(space.model.layers, plain.pp)
    budget = free / longest
    per_node = space.cluster.devices_per_node
    found = []
    counts = []
    for stage, layers in enumerate(split):
        k = _fewest_full_layers(segments, plain, stage, layers, budget, plain.devices > per_node)
        if k is None:
            break
        counts.append(k)
    else:
        counts = _hidden_full_layers(segments, plain, counts, split, plain.devices > per_node)
        found.append(_with_full_layers(plain, segments.sp, tuple(counts), split))
    selective = Scheme(plain.cp, plain.tp, plain.pp, segments.sp, Recompute.SELECTIVE)
    if all(_fits(segments, selective, stage, layers, budget, plain.devices > per_node)
           for stage, layers in enumerate(split)):
        found.append(selective)
    return found


def _fewest_full_layers(segments: Segments, plain: Scheme, stage: int, layers: int, budget: float,
                        across: bool) -> int | None:
    """The smallest ``k_σ`` with ``m_σ(k_σ) ≤ budget``, None when even ``L_σ`` is too many.
    ``m_σ`` falls linearly from ``k_σ = 1`` on (the first full layer adds the working set of
    recomputing a layer in the backward, the same for any count)."""
    if _stage_bytes(segments, plain, stage, layers, 0, across) <= budget:
        return 0
    first = _stage_bytes(segments, plain, stage, layers, 1, across)
    saving = (plain.pp - stage) * (segments.layer.kept_bytes_per_token - segments.full.kept_bytes_per_token)
    if first <= budget:
        return 1
    if saving <= 0:
        return None
    k = 1 + math.ceil((first - budget) / saving)
    while k > 2 and first - (k - 2) * saving <= budget:
        k -= 1
    while k <= layers and first - (k - 1) * saving > budget:
        k += 1
    return k if k <= layers else None


def _stage_bytes(segments: Segments, plain: Scheme, stage: int, layers: int, full: int, across: bool) -> float:
    """``m_σ`` of stage ``stage`` recomputing its first ``full`` layers in full."""
    counts = tuple(full if s == stage else 0 for s in range(plain.pp))
    scheme = Scheme(plain.cp, plain.tp, plain.pp, segments.sp, Recompute.FULL, counts) if full else plain
    return in_flight_bytes_per_token(stage_block(segments, scheme, stage, layers, across), plain.pp - stage)


def _hidden_full_layers(segments: Segments, plain: Scheme, counts: list[int], split: tuple[int, ...],
                        across: bool) -> list[int]:
    """``counts`` raised, stage by stage, as far as the stage's coefficients stay within the
    slowest stage's and its bytes do not grow: recomputation hidden under the pipeline's pace
    costs no time and frees memory."""
    def stage_time(stage: int, k: int) -> TimeCoefficients:
        scheme = _with_full_layers(plain, segments.sp, tuple(k if s == stage else 0 for s in range(plain.pp)), split)
        return stage_block(segments, scheme, stage, split[stage], across).time

    pace = max_time([stage_time(stage, k) for stage, k in enumerate(counts)])
    raised = []
    for stage, k in enumerate(counts):
        hidden = k
        while hidden < split[stage] and _within(stage_time(stage, hidden + 1), pace):
            hidden += 1
        bytes_at = _stage_bytes(segments, plain, stage, split[stage], hidden, across)
        raised.append(hidden if bytes_at <= _stage_bytes(segments, plain, stage, split[stage], k, across) else k)
    return raised


def _within(time: TimeCoefficients, pace: TimeCoefficients) -> bool:
    return time.a <= pace.a and time.b <= pace.b and time.c <= pace.c


def _fits(segments: Segments, scheme: Scheme, stage: int, layers: int, budget: float, across: bool) -> bool:
    return in_flight_bytes_per_token(stage_block(segments, scheme, stage, layers, across), scheme.pp - stage) <= budget


def _with_full_layers(plain: Scheme, sp: bool, counts: tuple[int, ...], split: tuple[int, ...]) -> Scheme:
    """The scheme recomputing ``counts[σ]`` layers of each stage in full."""
    if not any(counts):
        return Scheme(plain.cp, plain.tp, plain.pp, sp)
    if counts == split:
        return Scheme(plain.cp, plain.tp, plain.pp, sp, Recompute.FULL)
    return Scheme(plain.cp, plain.tp, plain.pp, sp, Recompute.FULL, counts)


def variant_targets(stats: StepStatistics, levels: int) -> tuple[tuple[int, Work], ...]:
    """The longest sequences the planner may need variants for — the sampled steps' longest at
    the quantiles ``j/levels`` and ``S`` — each with the mean work of the steps whose longest
    lies between it and the previous one (``n = Σs / h``: micro-batches of up to ``h`` tokens)."""
    quantiles = np.quantile(stats.maxima, np.arange(1, levels + 1) / levels, method="inverted_cdf")
    targets, previous = [], 0
    squares, tokens = stats.squares.sum(axis=1), stats.tokens.sum(axis=1)
    for longest in np.unique(np.append(quantiles, stats.max_seq_len).astype(np.int64)):
        steps = (stats.maxima > previous) & (stats.maxima <= longest)
        if not steps.any():
            steps = stats.maxima <= longest
        mean_tokens = float(tokens[steps].mean()) if steps.any() else float(longest)
        mean_squares = float(squares[steps].mean()) if steps.any() else float(longest) ** 2
        targets.append((int(longest), Work(mean_squares, mean_tokens, mean_tokens / longest)))
        previous = int(longest)
    return tuple(targets)


def plain_space(space: SchemeSpace, variants: Variants) -> SchemeSpace:
    """``space`` with only its plain schemes and no segments under :attr:`Variants.NONE`, else as is."""
    if variants is Variants.ALL:
        return space
    plain = tuple(p for p in space.profiles if not p.scheme.options)
    if not plain:
        raise HydraulisError("variants", variants.value, "leaves no scheme: every scheme of the space has options")
    return replace(space, profiles=plain, segments=())


def choose_variants(space: SchemeSpace, layout: OptimizerLayout,
                    targets: Sequence[tuple[int, Work]]) -> tuple[SchemeSpace, tuple[VariantChoice, ...]]:
    """Every plain scheme's chosen variant for each target that differs from the plain scheme,
    added to ``space`` as schemes of their own (none without segments).

    where ``S_v = ⌊free / m_v⌋`` (free: the device's memory less states, overhead and margin under
    the optimizer layout, the same for every variant) and ``t_v``, ``m_v`` the composed profile's
    time and bytes per token — the slowest stage's coefficients and the largest ``m_σ``.

    **The choice is exact and small** (:func:`choose_variant`). For each ``sp`` and each mode
    (none with ``k`` full layers per stage, or selective), ``S_v ≥ h`` splits into one condition per
    stage, ``m_σ(k_σ) ≤ free/h``, and ``m_σ`` falls linearly as ``k_σ`` grows while every time
    coefficient of the stage rises (recomputation adds work and keeps less, :class:`~hydraulis.base.segments.Segments`).
    The profile's coefficients are maxima over stages, each non-decreasing in every ``k_σ``; so the
    smallest ``k_σ`` that fits, stage by stage, is best for every ``W`` at once —
    ``k_σ = ⌈(m_σ(0) − free/h) / (m_σ(0) − m_σ(1))⌉`` clamped to ``[0, L_σ]``, infeasible beyond.
    Then each stage recomputes as many more layers as keep its coefficients within the slowest
    stage's: that recomputation hides under the pipeline's pace, costs no time and lets the
    variant hold longer sequences (the first stage, with the cheap embedding instead of the
    head, often recomputes several layers for free).
    That leaves at most four candidates, ``{no sp, sp} × {k, selective}``, compared on ``W``. A
    brute force over every ``(sp, mode, k_0 … k_{pp−1})`` agrees (tests/planner/test_variants.py).

    Worked example, LLaMA-7B analytic on A800, scheme (1,8,1), layout dp64: the plain scheme holds
    about 19K tokens; at ``h = 32,768`` sequence parallelism alone does not suffice and the choice
    is ``(1,8,1)[sp,recompute=full:K]`` with the fewest ``K`` that fit.

    **For the planner** (:func:`choose_variants`): the longest sequences its serving ranges may
    need — the sampled steps' longest at the quantiles ``j/K`` and ``S`` — each with the mean work
    of the steps up to it (:func:`variant_targets`); every scheme's chosen variants join the space
    as schemes of their own, each with its own ``a, b, c`` and longest sequence.
    """
    if not space.has_variants:
        return space, ()
    listed = {p.scheme for p in space.profiles}
    choices: dict[Scheme, VariantChoice] = {}
    for plain in (p for p in space.profiles if not p.scheme.options):
        for longest, work in targets:
            choice = choose_variant(space, layout, plain, longest, work)
            if choice is not None and choice.scheme not in listed:
                choices.setdefault(choice.scheme, choice)
    profiles = tuple(c.profile for c in choices.values())
    return replace(space, profiles=space.profiles + profiles), tuple(choices.values())


def frugal_space(space: SchemeSpace) -> SchemeSpace:
    """``space`` with each plain scheme replaced by its variant keeping the fewest bytes per
    token — every layer recomputed in full, with sequence parallelism where segments for it
    exist — beside the variants it lists, or ``space`` itself without segments: what its
    schemes can hold at most."""
    if not space.has_variants:
        return space
    frugal = []
    for plain in (p.scheme for p in space.profiles if not p.scheme.options):
        variants = [space.profile(Scheme(plain.cp, plain.tp, plain.pp, sp, Recompute.FULL)) for sp in (False, True)
                    if space.segments_of(plain.cp, plain.tp, sp) is not None]
        frugal.append(min(variants, key=lambda p: p.activation_bytes_per_token, default=space.profile(plain)))
    return replace(space, profiles=tuple(frugal) + tuple(p for p in space.profiles if p.scheme.options))


def with_schemes(space: SchemeSpace, schemes: Sequence[Scheme]) -> SchemeSpace:
    """``space`` listing also ``schemes`` (variants it composes, e.g. those a proposal uses)."""
    listed = {p.scheme for p in space.profiles}
    extra = tuple(space.profile(s) for s in dict.fromkeys(schemes) if s not in listed)
    return replace(space, profiles=space.profiles + extra) if extra else space


def explain_variants(strategies: Sequence[ProposedStrategy],
                     choices: Sequence[VariantChoice]) -> tuple[ProposedStrategy, ...]:
    """Each strategy's explanation with the reason of every variant its pipelines use."""
    reasons = {c.scheme: c.reason() for c in choices}
    explained = []
    for proposed in strategies:
        notes = [f"{reasons[g.scheme]}." for g in proposed.strategy.pipelines if g.scheme in reasons]
        plain = [str(g.scheme) for g in proposed.strategy.pipelines if not g.scheme.options]
        if notes and plain:
            notes.append(f"{', '.join(plain)} run{'s' if len(plain) == 1 else ''} plain.")
        explained.append(replace(proposed, explanation=" ".join([proposed.explanation, *notes]).strip()))
    return tuple(explained)


def variants_note(space: SchemeSpace, variants: Variants, choices: Sequence[VariantChoice]) -> str:
    """One sentence on the variants the planner could use."""
    if variants is Variants.NONE:
        return "Variants: none (plain schemes only, no sequence parallelism or recomputation)."
    if not space.has_variants:
        return "Variants: the schemes the space lists (it has no segments to compose others from)."
    schemes = {c.plain.scheme for c in choices}
    return (f"Variants: {len(choices)} chosen for {len(schemes)} schemes (the fastest holding each of the sampled "
            f"steps' longest sequences at quantiles and the maximum).")

"""Segments: the repeated decoder layer and the blocks around it, and stages composed from them.

A pipeline stage is a repeated unit — the decoder layer — plus a few blocks at its ends. CFP
(Profiling-based intra-operator parallelism, Alpa's cost model made cheap) observes that the
layer's cost depends only on its own partitioning, not on how many copies of it a stage holds;
so one profile per layer variant composes every stage of every scheme. Here a variant of the
layer is ``(cp, tp, sp, recompute)``: the pipeline degree and the number of layers recomputed
only say how many copies of which variant a stage holds. One :class:`Segments` per
``(cp, tp, sp)`` holds, as :class:`Block` s (time ``c + a·Σs² + b·Σs`` ms of one micro-batch
forward + backward, bytes per token of the micro-batch it keeps for the backward and bytes it
needs only while it runs):

The details: :class:`Segments`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from hydraulis.base.errors import require, require_number
from hydraulis.base.scheme import Recompute, Scheme
from hydraulis.base.scheme_profile import SchemeProfile, TimeCoefficients
from hydraulis.base.specs import ModelSpec
from hydraulis.base.stages import even_split

ZERO_TIME = TimeCoefficients(0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Block:
    """A part of a stage: its time for one micro-batch forward + backward, the bytes per token of
    the micro-batch it keeps for the backward (once per micro-batch in flight), its working set
    while it runs (``transient``), and for the ends of a stage the bytes of the stage's input
    they keep (``input``: a first layer recomputed in full keeps that same tensor) and those
    they release before the layers' backward (``released``: the last stage's loss and norm)."""

    time: TimeCoefficients = ZERO_TIME
    kept_bytes_per_token: float = 0.0
    transient_bytes_per_token: float = 0.0
    input_bytes_per_token: float = 0.0
    released_bytes_per_token: float = 0.0

    def __post_init__(self) -> None:
        for name in ("kept_bytes_per_token", "transient_bytes_per_token", "input_bytes_per_token",
                     "released_bytes_per_token"):
            require_number(getattr(self, name), name, minimum=0.0)


@dataclass(frozen=True)
class Segments:
    """The blocks of every stage of the schemes with degrees ``cp``, ``tp`` and sequence
    parallelism ``sp``, whatever their ``pp`` (:class:`Segments`).

    =================  ======================================================================
    block              where it counts
    =================  ======================================================================
    ``layer``          each decoder layer that keeps its activations (``recompute`` none)
    ``selective``      each layer recomputing its attention core
    ``full``           each layer recomputed in full (it keeps only its input)
    ``first``          once on the first stage of several: embedding, rotary tables, the hand-off
                       to the next stage, the working set of one layer's backward
    ``middle``         once on a stage between two others: hand-offs both ways, rotary tables, …
    ``last``           once on the last stage of several: hand-off from the previous stage,
                       final norm, output head and loss, …
    ``only``           once on the only stage (``pp = 1``): embedding, head, loss, …
    =================  ======================================================================

    plus ``network_hand_off``, the time a hand-off adds per neighbour when the pipeline spans
    nodes.

    **A stage composed.** Stage ``σ`` of scheme ``(cp, tp, pp)`` holding ``L_σ`` layers of which
    the first ``k_σ`` are recomputed in full (:meth:`~hydraulis.base.scheme.Scheme.full_layers`), the
    others in mode ``m`` (none or selective), with ends ``E_σ`` by its position and ``n_σ``
    neighbours::

        B_σ      = E_σ + (L_σ − k_σ)·layer_m + k_σ·full        (+ n_σ·network_hand_off across nodes)
        t_σ      = time(B_σ)                                    ms per micro-batch
        kept(B_σ) = Σ kept − [k_σ > 0]·input(E_σ)               (a first full layer keeps the stage's input)
        transient(B_σ) = max(transient(E_σ), max_{layers} transient − released(E_σ))
        m_σ      = (pp − σ)·kept(B_σ) + transient(B_σ)          bytes per micro-batch token

    (1F1B keeps ``pp − σ`` micro-batches in flight on stage ``σ``). The scheme's profile
    (:func:`compose_profile`) takes, coefficient by coefficient, the largest ``a, b, c`` of its
    stages — an upper bound of every stage's time for every micro-batch, the slowest stage setting
    the pipeline's pace in 1F1B — and the largest ``m_σ`` as its activation bytes per token.

    The blocks of a stage run one at a time, so its working set is the largest of theirs; the last
    stage's layers run their backward after the loss and final norm have released theirs.

    **Monotone by construction.** Recomputation adds work and never keeps more: ``selective`` and
    ``full`` take at least ``layer`` 's ``a, b, c`` and keep at most its bytes (checked on
    construction). So more layers recomputed on a stage never make any coefficient smaller, and
    ``m_σ`` falls with every full layer after the first (the first adds, once, the working set of
    recomputing a layer in the backward) — the facts the variant choice
    (:mod:`hydraulis.planner.variants`) rests on.

    Worked example, two stages of 2 layers, blocks ``layer = (b 1, kept 10)``, ``full = (b 1.5,
    kept 1)``, ``first = last = (kept 1)``: with ``k = (2, 0)`` stage 0 has ``b = 3`` and keeps
    ``2·(2·1 + 1) = 6`` bytes per token, stage 1 ``b = 2`` and ``1·(2·10 + 1) = 21``; the profile
    has ``b = 3`` and 21 bytes per token.
    """

    cp: int
    tp: int
    sp: bool
    layer: Block
    selective: Block
    full: Block
    first: Block = field(default_factory=Block)
    middle: Block = field(default_factory=Block)
    last: Block = field(default_factory=Block)
    only: Block = field(default_factory=Block)
    network_hand_off: TimeCoefficients = ZERO_TIME

    def __post_init__(self) -> None:
        Scheme(self.cp, self.tp, 1, self.sp)
        for name in ("selective", "full"):
            block = getattr(self, name)
            for coefficient in ("a", "b", "c"):
                value, least = getattr(block.time, coefficient), getattr(self.layer.time, coefficient)
                require(value >= least, f"{name}.{coefficient}", value,
                        f"({name} recomputation) must be >= the layer's {least}: recomputation adds work")
            require(block.kept_bytes_per_token <= self.layer.kept_bytes_per_token, f"{name}.kept_bytes_per_token",
                    block.kept_bytes_per_token, f"({name} recomputation) must be <= the layer's "
                                                f"{self.layer.kept_bytes_per_token}: recomputation keeps less")

    @property
    def key(self) -> tuple[int, int, bool]:
        return self.cp, self.tp, self.sp

    def layer_block(self, recompute: Recompute) -> Block:
        return {Recompute.NONE: self.layer, Recompute.SELECTIVE: self.selective, Recompute.FULL: self.full}[recompute]

    def ends(self, stage: int, pp: int) -> Block:
        """The ends of stage ``stage`` of ``pp`` by its position."""
        if pp == 1:
            return self.only
        return self.first if stage == 0 else self.last if stage == pp - 1 else self.middle


def stage_block(segments: Segments, scheme: Scheme, stage: int, layers: int, across_nodes: bool = False) -> Block:
    """``B_σ`` of :class:`Segments`: stage ``stage`` of ``scheme`` holding ``layers`` layers."""
    ends = segments.ends(stage, scheme.pp)
    full = scheme.full_layers(stage, layers)
    kept_mode = Recompute.NONE if scheme.recompute is Recompute.FULL else scheme.recompute
    parts = [(block, count) for block, count in ((segments.layer_block(kept_mode), layers - full),
                                                 (segments.full, full)) if count > 0]
    if across_nodes:
        parts.append((Block(segments.network_hand_off), (stage > 0) + (stage < scheme.pp - 1)))
    time = ends.time
    for block, count in parts:
        time = _add(time, TimeCoefficients(block.time.a * count, block.time.b * count, block.time.c * count))
    kept = ends.kept_bytes_per_token + sum(block.kept_bytes_per_token * count for block, count in parts)
    if full:
        kept -= min(ends.input_bytes_per_token, segments.full.kept_bytes_per_token)
    running = max((block.transient_bytes_per_token for block, _ in parts), default=0.0)
    return Block(time, kept, max(ends.transient_bytes_per_token, running - ends.released_bytes_per_token))


def in_flight_bytes_per_token(block: Block, in_flight: int) -> float:
    """``m_σ = (pp − σ)·kept + transient`` with ``in_flight = pp − σ``."""
    return in_flight * block.kept_bytes_per_token + block.transient_bytes_per_token


def stage_blocks(segments: Segments, model: ModelSpec, scheme: Scheme, devices_per_node: int) -> list[Block]:
    """Every stage's block under the even split of ``model``'s layers."""
    across = scheme.devices > devices_per_node
    return [stage_block(segments, scheme, stage, layers, across)
            for stage, layers in enumerate(even_split(model.layers, scheme.pp))]


def compose_profile(segments: Segments, model: ModelSpec, scheme: Scheme, devices_per_node: int,
                    overhead_bytes: int) -> SchemeProfile:
    """The profile of ``scheme`` composed from ``segments`` (:class:`Segments`)."""
    require(segments.key == (scheme.cp, scheme.tp, scheme.sp), "segments", segments.key,
            f"do not describe scheme {scheme}")
    blocks = stage_blocks(segments, model, scheme, devices_per_node)
    return SchemeProfile(
        scheme=scheme,
        time=max_time([b.time for b in blocks]),
        activation_bytes_per_token=max(in_flight_bytes_per_token(b, scheme.pp - stage) for stage, b in enumerate(blocks)),
        overhead_bytes=overhead_bytes,
    )


def max_time(times: Sequence[TimeCoefficients]) -> TimeCoefficients:
    """The coefficient-wise largest of ``times``."""
    return TimeCoefficients(max(t.a for t in times), max(t.b for t in times), max(t.c for t in times))


def _add(x: TimeCoefficients, y: TimeCoefficients) -> TimeCoefficients:
    return TimeCoefficients(x.a + y.a, x.b + y.b, x.c + y.c)

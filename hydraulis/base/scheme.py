"""A scheme: one parallel layout of a model replica, ``(cp, tp, pp)`` plus its options (design §2).

:class:`Recompute` says which activations a pipeline recomputes, :class:`SchemeOptions` the
options apart from the degrees (``sp,recompute=full``), :class:`Scheme` the layout itself, plain
or staged (:mod:`hydraulis.base.stages`). Re-exported by :mod:`hydraulis.base.types`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from hydraulis.base.errors import HydraulisError, require, require_int
from hydraulis.base.limits import PARALLEL_DEGREE
from hydraulis.base.stages import Stage, even_split, stages_text


class Recompute(str, Enum):
    """Which activations a pipeline recomputes in backward instead of keeping from forward."""

    NONE = "none"
    """Keep every activation autograd needs."""
    SELECTIVE = "selective"
    """Recompute the attention core (Korthikanti et al. 2022): keep its inputs, not its internals."""
    FULL = "full"
    """Keep only each layer's input; recompute the whole layer in backward."""


@dataclass(frozen=True)
class SchemeOptions:
    """The options of a scheme apart from its degrees, written as in a SPEC's brackets:
    ``sp``, ``recompute=none|selective|full`` and ``ep=N`` (expert parallelism of a mixture of
    experts), comma-separated (e.g. ``sp,recompute=full,ep=4``; empty: the defaults). Full
    recomputation of only some layers is ``recompute=full:K`` (the
    first ``K`` layers of every stage) or ``recompute=full:K1/K2/…`` (one count per stage), see
    :class:`Scheme`. :meth:`parse` reads that text, :meth:`scheme` applies the options to degrees."""

    sp: bool = False
    recompute: Recompute = Recompute.NONE
    recompute_layers: tuple[int, ...] = ()
    ep: int = 1

    @classmethod
    def parse(cls, text: str, field: str = "options") -> SchemeOptions:
        """The options of ``text``; an unknown, repeated or ill-valued option names ``field``."""
        values: dict[str, object] = {}
        for item in (part.strip() for part in text.split(",")):
            if not item:
                continue
            name, _, value = item.partition("=")
            mode, _, layers = value.partition(":")
            if name == "sp" and not value:
                require("sp" not in values, field, item, "is given twice")
                values["sp"] = True
                continue
            if name == "ep":
                require(value.isdigit() and int(value) >= 1, field, item, "must be ep=N with N ≥ 1")
                require("ep" not in values, field, item, "is given twice")
                values["ep"] = int(value)
                continue
            if name != "recompute" or mode not in {r.value for r in Recompute} or not _layer_counts(layers, mode):
                raise HydraulisError(field, item, "is not an option: sp, or recompute=" +
                                     "|".join(r.value for r in Recompute) + " (full:K or full:K1/K2/… for K layers "
                                                                           "of each stage), or ep=N (experts)")
            require("recompute" not in values, field, item, "is given twice")
            values["recompute"] = Recompute(mode)
            values["recompute_layers"] = tuple(int(k) for k in layers.split("/")) if layers else ()
        return cls(**values)

    @property
    def items(self) -> tuple[str, ...]:
        """The non-default options in SPEC order, e.g. ``("sp", "recompute=full:2")``."""
        layers = ":" + "/".join(str(k) for k in self.recompute_layers) if self.recompute_layers else ""
        return (("sp",) if self.sp else ()) + (
            (f"recompute={self.recompute.value}{layers}",) if self.recompute is not Recompute.NONE else ()) + (
            (f"ep={self.ep}",) if self.ep > 1 else ())

    def scheme(self, cp: int, tp: int, pp: int) -> Scheme:
        return Scheme(cp, tp, pp, self.sp, self.recompute, self.recompute_layers, ep=self.ep)

    def __str__(self) -> str:
        return ",".join(self.items)


def _layer_counts(text: str, mode: str) -> bool:
    """Whether ``text`` (after ``recompute=MODE:``) is empty or, for ``full``, counts ``K1/K2/…``."""
    return not text or (mode == Recompute.FULL.value and all(k.isdigit() for k in text.split("/")))


@dataclass(frozen=True, order=True)
class Scheme:
    """One parallel layout of a model replica: context, tensor and pipeline parallel degrees,
    plus its options — Megatron-style sequence parallelism ``sp`` (needs ``tp > 1``) and
    activation recomputation. Two schemes with the same degrees and other options are two
    schemes: they differ in time and in the longest sequence they hold.

    ``recompute_layers`` refines ``recompute = full``: empty, every layer is recomputed; else
    ``(K,)`` recomputes the first ``K`` decoder layers of every stage and ``(K_0, …, K_{pp−1})``
    the first ``K_σ`` of stage ``σ`` in full, the other layers keeping their activations
    (Megatron-LM's "block" recomputation, ``--recompute-num-layers``, with a count per stage:
    1F1B keeps ``pp − σ`` micro-batches in flight on stage ``σ``, so the first stages need the
    most). Counts equal on every stage are written once: ``(2, 2)`` is ``(2,)``. E.g.
    ``Scheme(1, 1, 2, recompute=FULL, recompute_layers=(2, 1))`` on a 4-layer model recomputes
    layers 0 and 1 (all of stage 0) and 2 (the first of stage 1's 2 and 3).

    ``stages`` makes a *staged* scheme (:mod:`hydraulis.base.stages`, design §7.4): one
    :class:`~hydraulis.base.stages.Stage` per pipeline stage, each with its own tp, layer count and
    device group; ``pp`` is then their number and ``tp`` the widest stage's (build one with
    :meth:`staged`). E.g. ``Scheme.staged(1, (Stage(4, 20), Stage(2, 12)))`` is ``(1|4:20>2:12)``:
    6 devices, 32 layers. Empty ``stages``: every stage has ``tp`` devices and the layers are
    split evenly.

    ``ep`` is the expert-parallel degree of a mixture of experts, folded over a stage's tp ranks
    as Megatron-Core's MoE parallel folding folds it over attention's ranks: attention keeps its
    cp and tp, the routed experts are split over ``ep`` consecutive tp ranks, each holding ``E/ep``
    of them, and each rank's own tokens — its sequence-parallel share, so ``ep > 1`` needs ``sp`` —
    reach them by all-to-all. ``ep`` divides ``tp``: e.g. ``(1,4,1)[sp,ep=4]`` holds a quarter of
    the experts per device, ``(2,4,1)[sp,ep=2]`` half."""

    cp: int
    tp: int
    pp: int
    sp: bool = False
    recompute: Recompute = Recompute.NONE
    recompute_layers: tuple[int, ...] = ()
    stages: tuple[Stage, ...] = ()
    ep: int = 1

    @classmethod
    def staged(cls, cp: int, stages: tuple[Stage, ...], recompute: Recompute = Recompute.NONE,
               recompute_layers: tuple[int, ...] = ()) -> Scheme:
        """The staged scheme of ``cp`` and ``stages`` (``tp`` the widest, ``pp`` their number)."""
        require(len(stages) > 0, "scheme.stages", [], "must name at least one stage")
        return cls(cp, max(s.tp for s in stages), len(stages), False, recompute, recompute_layers, tuple(stages))

    def __post_init__(self) -> None:
        for name in ("cp", "tp", "pp"):
            PARALLEL_DEGREE.check(getattr(self, name), f"scheme.{name}")
        require(isinstance(self.sp, bool), "scheme.sp", self.sp, "must be true or false")
        require(not self.sp or self.tp > 1, "scheme.sp", self.sp,
                f"needs scheme.tp > 1 (sequence parallelism shards over the tp group), tp = {self.tp}")
        require(isinstance(self.recompute, Recompute), "scheme.recompute", self.recompute,
                f"must be one of {', '.join(r.value for r in Recompute)}")
        layers = self.recompute_layers
        require(isinstance(layers, tuple), "scheme.recompute_layers", layers, "must be a tuple of layer counts")
        for count in layers:
            require_int(count, "scheme.recompute_layers", minimum=0)
        require(not layers or self.recompute is Recompute.FULL, "scheme.recompute_layers", list(layers),
                f"needs recompute = full (it counts the layers recomputed in full), not {self.recompute.value}")
        require(len(layers) in (0, 1, self.pp), "scheme.recompute_layers", list(layers),
                f"must give one count for every stage or one per stage (pp = {self.pp})")
        require(not layers or any(layers), "scheme.recompute_layers", list(layers),
                "recomputes no layer: leave recomputation out")
        PARALLEL_DEGREE.check(self.ep, "scheme.ep")
        require(self.tp % self.ep == 0, "scheme.ep", self.ep,
                f"must divide scheme.tp = {self.tp} (the experts fold over the tp ranks)")
        require(self.ep == 1 or self.sp, "scheme.ep", self.ep,
                "needs sp (each tp rank dispatches its own share of the tokens)")
        require(self.ep == 1 or not self.stages, "scheme.ep", self.ep, "is not supported with per-stage tp")
        if len(set(layers)) == 1 and len(layers) > 1:
            object.__setattr__(self, "recompute_layers", layers[:1])
        self._check_stages()

    def _check_stages(self) -> None:
        stages = self.stages
        require(isinstance(stages, tuple) and all(isinstance(s, Stage) for s in stages), "scheme.stages",
                stages, "must be a tuple of stages")
        if not stages:
            return
        text = stages_text(self.cp, stages)
        require(len(stages) == self.pp, "scheme.stages", text, f"must name one stage per pipeline stage (pp = {self.pp})")
        require(self.tp == max(s.tp for s in stages), "scheme.tp", self.tp,
                f"must be the widest stage's tp ({max(s.tp for s in stages)}) in a staged scheme {text}")
        require(not self.sp, "scheme.sp", self.sp, f"is not supported with per-stage tp ({text})")
        for stage, s in enumerate(stages):
            self.full_layers(stage, s.layers)

    @property
    def is_staged(self) -> bool:
        """Whether the stages differ in tp, layers or device group (``stages`` given)."""
        return bool(self.stages)

    def stage_tp(self, stage: int) -> int:
        """The tensor-parallel degree of ``stage``."""
        return self.stages[stage].tp if self.stages else self.tp

    def stage_layers(self, layers: int) -> tuple[int, ...]:
        """The decoder layers of each stage for a model of ``layers`` layers: the stages' own
        counts, or the :func:`~hydraulis.base.stages.even_split`."""
        if self.stages:
            return tuple(s.layers for s in self.stages)
        return even_split(layers, self.pp)

    @property
    def devices(self) -> int:
        if self.stages:
            return self.cp * sum(s.tp for s in self.stages)
        return self.cp * self.tp * self.pp

    @property
    def variant(self) -> SchemeOptions:
        """The options apart from the degrees."""
        return SchemeOptions(self.sp, self.recompute, self.recompute_layers, self.ep)

    def full_layers(self, stage: int, layers: int) -> int:
        """How many of the ``layers`` decoder layers of ``stage`` are recomputed in full."""
        if self.recompute is not Recompute.FULL:
            return 0
        if not self.recompute_layers:
            return layers
        count = self.recompute_layers[0 if len(self.recompute_layers) == 1 else stage]
        require(count <= layers, "scheme.recompute_layers", list(self.recompute_layers),
                f"recomputes {count} layers of stage {stage}, which holds {layers}")
        return count

    def stage_recompute(self, stage: int, layers: int) -> tuple[Recompute, ...]:
        """What each of the ``layers`` decoder layers of ``stage`` recomputes, in order."""
        if self.recompute is not Recompute.FULL:
            return (self.recompute,) * layers
        full = self.full_layers(stage, layers)
        return (Recompute.FULL,) * full + (Recompute.NONE,) * (layers - full)

    @property
    def options(self) -> tuple[str, ...]:
        """The non-default options in SPEC order, e.g. ``("sp", "recompute=full")``."""
        return self.variant.items

    def __str__(self) -> str:
        options = f"[{','.join(self.options)}]" if self.options else ""
        if self.stages:
            return f"({stages_text(self.cp, self.stages)}){options}"
        return f"({self.cp},{self.tp},{self.pp}){options}"

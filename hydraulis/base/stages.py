"""Pipeline stages that differ: per-stage tensor parallelism, layer counts and device groups.

On a cluster of several device types (design §7.4) one pipeline may run its first stages on
one device type and its last on another, each with its own tensor-parallel degree and number
of decoder layers, so that every stage takes about the same time (FlashFlex, Yan et al. 2024).
A :class:`Stage` is one such stage: ``tp`` devices of device group ``group`` holding ``layers``
consecutive decoder layers. A :class:`~hydraulis.base.scheme.Scheme` with ``stages`` is a *staged*
scheme: its ``pp`` is the number of stages, its ``tp`` the widest stage's, its devices
``cp · Σ_σ tp_σ`` (cp is uniform within a pipeline).

Text form (the SPEC of :mod:`hydraulis.job.strategy_spec`)::

    STAGED := CP '|' STAGE ('>' STAGE)*
    STAGE  := TP ':' LAYERS ['@' GROUP]

``1|4:20>2:12`` is cp 1, a tp-4 stage of 20 layers, then a tp-2 stage of 12 (32 layers,
``1·(4 + 2) = 6`` devices); ``1|4:20@h100>2:12@a100`` puts the first stage on the cluster's
device group ``h100`` and the second on ``a100``. A stage without ``@GROUP`` runs on the
cluster's first group (on a one-type cluster, the only one).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hydraulis.base.errors import HydraulisError, require, require_int
from hydraulis.base.limits import PARALLEL_DEGREE

_GROUP = re.compile(r"^[A-Za-z0-9_.-]+$")
_STAGE = re.compile(r"^(\d+):(\d+)(?:@([A-Za-z0-9_.-]+))?$")
STAGED_FORM = "CP|TP:LAYERS[@GROUP]>TP:LAYERS[@GROUP]>…, e.g. 1|4:20>2:12 or 1|2:3@h100>1:1@a100"


def even_split(layers: int, pp: int) -> tuple[int, ...]:
    """``pp`` stage sizes summing to ``layers``, the first ``layers mod pp`` one larger: the split
    of every plain (unstaged) pipeline and of the optimizer layout's stages. E.g. ``L = 4, pp = 3``
    → ``(2, 1, 1)``; ``L = 60, pp = 8`` → ``(8, 8, 8, 8, 7, 7, 7, 7)``."""
    require_int(pp, "pp", minimum=1)
    require(layers >= pp, "pp", pp, f"exceeds the {layers} layers")
    base, extra = divmod(layers, pp)
    return tuple(base + (stage < extra) for stage in range(pp))


@dataclass(frozen=True, order=True)
class Stage:
    """``tp`` devices of device group ``group`` ("" = the cluster's first) running ``layers``
    consecutive decoder layers."""

    tp: int
    layers: int
    group: str = ""

    def __post_init__(self) -> None:
        PARALLEL_DEGREE.check(self.tp, "stage.tp")
        require_int(self.layers, "stage.layers", minimum=1)
        require(isinstance(self.group, str) and (not self.group or _GROUP.match(self.group) is not None),
                "stage.group", self.group, "must be a device group name (letters, digits, _ . -)")

    def __str__(self) -> str:
        return f"{self.tp}:{self.layers}" + (f"@{self.group}" if self.group else "")


def parse_stages(text: str, field: str = "stages") -> tuple[int, tuple[Stage, ...]]:
    """``(cp, stages)`` of ``text`` in the STAGED form of the module docstring; an error naming
    ``field`` (and the stage) otherwise. E.g. ``"1|4:20>2:12"`` → ``(1, (Stage(4, 20), Stage(2, 12)))``."""
    cp_text, bar, rest = "".join(str(text).split()).partition("|")
    if not bar or not cp_text.isdigit() or not rest:
        raise HydraulisError(field, text, f"must be {STAGED_FORM}")
    stages = []
    for index, part in enumerate(rest.split(">")):
        match = _STAGE.match(part)
        if match is None:
            raise HydraulisError(f"{field}[{index}]", part, f"must be TP:LAYERS[@GROUP], in {STAGED_FORM}")
        tp, layers, group = match.groups()
        try:
            stages.append(Stage(int(tp), int(layers), group or ""))
        except HydraulisError as error:
            raise HydraulisError(f"{field}[{index}].{error.field.split('.')[-1]}", error.value, error.problem) from None
    cp = int(cp_text)
    PARALLEL_DEGREE.check(cp, f"{field}.cp")
    return cp, tuple(stages)


def stages_text(cp: int, stages: tuple[Stage, ...]) -> str:
    """The STAGED text of ``cp`` and ``stages``: the inverse of :func:`parse_stages`."""
    return f"{cp}|" + ">".join(str(stage) for stage in stages)


def hand_off_peers(tp_rank: int, tp: int, other: int) -> tuple[int, range]:
    """``(x mod b, the y ≡ x (mod a) below b)`` for tp rank ``x`` of a stage of ``a = tp`` ranks
    beside a stage of ``b = other``: the neighbour's tp rank it takes from, and those it gives to
    (:mod:`hydraulis.runtime.rank_map`). E.g. ``(1, 2, 1)`` → ``(0, range(1, 1, 2))`` (gives to none),
    ``(0, 1, 4)`` → ``(0, range(0, 4))``."""
    return tp_rank % other, range(tp_rank, other, tp)

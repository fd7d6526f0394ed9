"""Strategy SPEC: a strategy written on the command line.

Grammar (whitespace ignored)::

    SPEC     := PIPELINE ('+' PIPELINE)*
    PIPELINE := (PLAIN | STAGED) ['x' COUNT]
    PLAIN    := CP ',' TP ',' PP [':' L1 '/' L2 '/' … '/' Lpp] [OPTIONS]
    STAGED   := CP '|' STAGE ('>' STAGE)* [OPTIONS]
    STAGE    := TP ':' LAYERS ['@' GROUP]
    OPTIONS  := '[' OPTION (',' OPTION)* ']'
    OPTION   := 'sp' | 'recompute=' ('none' | 'selective' | 'full' [':' K ('/' K)*])

The details: :func:`parse_strategy_spec`."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from hydraulis.base.errors import HydraulisError, require
from hydraulis.base.presets import device_preset
from hydraulis.base.stages import parse_stages
from hydraulis.base.types import (
    Cluster,
    DeviceSpec,
    ModelSpec,
    PipelineGroup,
    Scheme,
    SchemeOptions,
    SchemeSpace,
    Strategy,
    TimeCoefficients,
)
from hydraulis.job.staged_profile import analytic_profile_of, space_profile_of
from hydraulis.sharding.pipeline import PipelineSplit, StrategySplit

_OPTIONS = r"(?:\[([^\[\]]*)\])?"
_PIPELINE = re.compile(rf"^(\d+),(\d+),(\d+){_OPTIONS}(?::(\d+(?:/\d+)*))?{_OPTIONS}(?:x(\d+))?$")
_STAGED = re.compile(rf"^(\d+\|[^\[\]]+?){_OPTIONS}(?:x(\d+))?$")
_FORM = ("cp,tp,pp with an optional :L1/L2/… layer split, [options] and xCOUNT, "
         "e.g. 1,2,1x2, 1,1,2:3/1 or 1,4,1[sp,recompute=full]x2, or staged CP|TP:LAYERS>TP:LAYERS…, "
         "e.g. 1|2:3>1:1")

TimeSource = Callable[[Scheme], TimeCoefficients]


@dataclass(frozen=True)
class SpecGroup:
    """``count`` pipelines of ``scheme``; ``stage_layers`` is None for the even split."""

    scheme: Scheme
    count: int
    stage_layers: tuple[int, ...] | None = None


def parse_strategy_spec(text: str, field: str = "strategy") -> tuple[SpecGroup, ...]:
    """The groups of a SPEC, in order; an error naming the offending pipeline otherwise.

    ``1,2,1+1,1,2`` is one pipeline of scheme (cp 1, tp 2, pp 1) beside one of (1, 1, 2);
    ``1,1,2x2`` two pipelines of (1, 1, 2); ``1,1,2:3/1`` one pipeline whose first stage holds
    3 layers and second 1 (default: the even split of :func:`~hydraulis.base.stages.even_split`).
    Options in brackets (:class:`~hydraulis.base.scheme.SchemeOptions`) make another scheme:
    ``1,4,1[sp]x2`` two pipelines of tp 4 with sequence parallelism,
    ``2,2,1[sp,recompute=full]+1,1,2:3/1[recompute=selective]`` one pipeline recomputing whole
    layers beside one recomputing the attention core
    (:class:`~hydraulis.runtime.model.decoder.StageModel`);
    ``1,1,2[recompute=full:1]`` recomputes the first layer of each stage in full, ``1,1,2[recompute=full:2/1]``
    the first two of stage 0 and the first of stage 1 (:class:`~hydraulis.base.scheme.Scheme`). The
    brackets may also come before the split (``1,1,2[sp]:3/1``); a layout prints them after it.

    A STAGED pipeline (:mod:`hydraulis.base.stages`, design §9.2) gives each stage its own tensor-parallel
    degree and layer count (cp is uniform within a pipeline): ``1|2:3>1:1+1,1,1`` is one pipeline
    whose first stage runs 3 layers on 2 tp ranks and whose second runs 1 layer on one rank (3
    devices), beside a one-device pipeline; ``1|2:1>1:3x2`` two such pipelines of 1 and 3 layers.
    Its options are recomputation only (``1|2:3>1:1[recompute=full:1]``): sequence parallelism is
    not combined with per-stage tp. A ``@GROUP`` names the cluster's device group of the stage
    (the runtime runs every stage on the devices it is given; the planner and ``hydraulis memory
    --cluster`` read the groups). ``x`` followed by digits at the end is always the count.

    A parsed SPEC becomes a :class:`~hydraulis.sharding.pipeline.StrategySplit` with
    :func:`strategy_layout`, which also attaches each scheme's time coefficients (for predicted
    times) — from a scheme space when one is given, else from the analytic model of the ``cpu``
    device preset (:mod:`hydraulis.profiler.analytic`); a staged scheme's from the segments of each
    stage's tp (:mod:`hydraulis.job.staged_profile`).
    """
    if not isinstance(text, str) or not text.strip():
        raise HydraulisError(field, text, f"must be pipelines joined by '+', each {_FORM}")
    groups = []
    for index, part in enumerate("".join(text.split()).split("+")):
        where = f"{field}[{index}]"
        staged = _STAGED.match(part)
        match = _PIPELINE.match(part)
        if staged is not None:
            stages, options, count = staged.groups()
            group = _staged_group(stages, options, where)
        elif match is not None:
            group, count = _plain_group(part, match.groups()[:-1], where), match.groups()[-1]
        else:
            raise HydraulisError(field, text, f"pipeline {index + 1} ({part!r}) must be {_FORM}")
        require(count is None or int(count) >= 1, f"{where}.count", count, "must be >= 1")
        groups.append(replace(group, count=int(count) if count else 1))
    return tuple(groups)


def _plain_group(part: str, fields: tuple, where: str) -> SpecGroup:
    """One ``cp,tp,pp[:split][options]`` pipeline (count 1)."""
    cp, tp, pp, before, split, after = fields
    require(before is None or after is None, f"{where}.options", part, "gives options twice")
    scheme = _with_options(before or after, where, lambda options: options.scheme(int(cp), int(tp), int(pp)))
    layers = tuple(int(n) for n in split.split("/")) if split else None
    require(layers is None or len(layers) == scheme.pp, f"{where}.stage_layers", split,
            f"must give one layer count per stage (pp = {scheme.pp})")
    return SpecGroup(scheme, 1, layers)


def _staged_group(text: str, options: str | None, where: str) -> SpecGroup:
    """One ``CP|TP:L>TP:L…[options]`` pipeline (count 1): a staged scheme, its split its stages'."""
    cp, stages = parse_stages(text, f"{where}.stages")

    def scheme(parsed: SchemeOptions) -> Scheme:
        require(not parsed.sp, f"{where}.sp", True, f"is not supported with per-stage tp ({text})")
        return Scheme.staged(cp, stages, parsed.recompute, parsed.recompute_layers)

    return SpecGroup(_with_options(options, where, scheme), 1)


def _with_options(text: str | None, where: str, build: Callable[[SchemeOptions], Scheme]) -> Scheme:
    """``build`` of the parsed options, errors naming ``where``."""
    try:
        return build(SchemeOptions.parse(text or "", f"{where}.options"))
    except HydraulisError as error:
        if error.field.startswith(where):
            raise
        raise HydraulisError(f"{where}.{error.field.split('.')[-1]}", error.value, error.problem) from None


def strategy_layout(groups: tuple[SpecGroup, ...], model: ModelSpec, times: TimeSource,
                    max_seq_len: int) -> StrategySplit:
    """The strategy of ``groups`` for ``model``: pipelines in group order, each group's
    pipelines with the group's split; ``max_seq_len`` is each pipeline's capacity."""
    for index, group in enumerate(groups):
        model.check_scheme(group.scheme, f"groups[{index}]")
    strategy = Strategy(tuple(PipelineGroup(g.scheme, g.count, max_seq_len, times(g.scheme)) for g in groups))
    pipelines = tuple(PipelineSplit(g.scheme, g.stage_layers or g.scheme.stage_layers(model.layers))
                      for g in groups for _ in range(g.count))
    layout = StrategySplit(strategy, pipelines)
    layout.check(model)
    return layout


def parse_strategy(text: str, model: ModelSpec, times: TimeSource, max_seq_len: int,
                   field: str = "strategy") -> StrategySplit:
    """:func:`parse_strategy_spec` then :func:`strategy_layout`, errors naming ``field``."""
    try:
        return strategy_layout(parse_strategy_spec(text, field), model, times, max_seq_len)
    except HydraulisError as error:
        if error.field.startswith(field):
            raise
        raise HydraulisError(f"{field} {text!r}: {error.field}", error.value, error.problem) from None


def scheme_times(model: ModelSpec, devices: int, space: SchemeSpace | None = None,
                 device: DeviceSpec | None = None) -> TimeSource:
    """Time coefficients per scheme: the space's profile, or the analytic model of ``device``
    (default: the ``cpu`` preset); a staged scheme's composed stage by stage
    (:mod:`hydraulis.job.staged_profile`)."""
    if space is not None:
        require(space.model.matches(model), "space.model", space.model.name,
                f"differs from the trained model {model.name} (the times are the space's model's)")
        return lambda scheme: space_profile_of(space, scheme).time
    device = device or device_preset("cpu")
    cluster = Cluster(devices, devices, device.name)
    return lambda scheme: analytic_profile_of(model, device, cluster, scheme).time

"""How a strategy's pipelines lay the model out: stages as contiguous layer ranges.

A pipeline of scheme ``(cp, tp, pp)`` cuts the decoder's ``L`` layers into ``pp`` contiguous
ranges, one per stage; stage 0 also holds the token embedding, the last stage the final norm
and the output head. The split is even by default (:func:`~hydraulis.base.stages.even_split`: the first ``L mod pp``
stages take one layer more, e.g. ``L = 4, pp = 3`` → ``(2, 1, 1)``) or given explicitly, e.g.
``(3, 1)`` to lighten the last stage, which also carries the head. A staged scheme
(:mod:`hydraulis.base.stages`, design §9.2) carries its split in its stages: ``1|2:3>1:1`` is the
layout ``(3, 1)`` whose stage 0 runs on 2 tp ranks and stage 1 on one.

:class:`StrategySplit` is a strategy as the runtime runs it: the planner's
:class:`~hydraulis.base.strategy.Strategy` (schemes, counts, time coefficients) plus one
:class:`PipelineSplit` per pipeline in :meth:`Strategy.expanded` order. Its ``str`` is the
strategy SPEC of :mod:`hydraulis.job.strategy_spec`.
"""

from __future__ import annotations

from dataclasses import dataclass

from hydraulis.base.errors import require, require_int
from hydraulis.base.stages import even_split, stages_text
from hydraulis.base.types import ModelSpec, Scheme, Strategy


@dataclass(frozen=True)
class PipelineSplit:
    """One pipeline: its scheme and the number of decoder layers on each of its stages."""

    scheme: Scheme
    stage_layers: tuple[int, ...]

    def __post_init__(self) -> None:
        require(len(self.stage_layers) == self.scheme.pp, "stage_layers", self.stage_layers,
                f"must name one layer count per stage (pp = {self.scheme.pp})")
        for stage, count in enumerate(self.stage_layers):
            require_int(count, f"stage_layers[{stage}]", minimum=1)
            self.scheme.full_layers(stage, count)
        if self.scheme.is_staged:
            require(self.stage_layers == self.scheme.stage_layers(self.layers), "stage_layers", self.stage_layers,
                    f"must be the staged scheme's own {self.scheme.stage_layers(self.layers)}")

    @property
    def layers(self) -> int:
        return sum(self.stage_layers)

    def stage_range(self, stage: int) -> range:
        """The decoder layers of ``stage`` (global layer indices)."""
        start = sum(self.stage_layers[:stage])
        return range(start, start + self.stage_layers[stage])

    def is_even(self) -> bool:
        return self.stage_layers == even_split(self.layers, self.scheme.pp)

    def spec(self) -> str:
        """``cp,tp,pp`` with ``:l1/l2/…`` when the split is not the even one (a staged scheme:
        ``cp|tp:l1>tp:l2…``), then the scheme's options in brackets, e.g.
        ``1,1,2:3/1[recompute=full]`` or ``1|2:3>1:1[recompute=selective]``."""
        if self.scheme.is_staged:
            text, split = stages_text(self.scheme.cp, self.scheme.stages), ""
        else:
            text = f"{self.scheme.cp},{self.scheme.tp},{self.scheme.pp}"
            split = "" if self.is_even() else ":" + "/".join(str(n) for n in self.stage_layers)
        options = f"[{','.join(self.scheme.options)}]" if self.scheme.options else ""
        return text + split + options


@dataclass(frozen=True)
class StrategySplit:
    """A strategy plus the stage split of each of its pipelines (``Strategy.expanded()`` order)."""

    strategy: Strategy
    pipelines: tuple[PipelineSplit, ...]

    def __post_init__(self) -> None:
        expanded = self.strategy.expanded()
        require(len(self.pipelines) == len(expanded), "pipelines", len(self.pipelines),
                f"must hold one layout per pipeline of the strategy ({len(expanded)})")
        for index, (layout, group) in enumerate(zip(self.pipelines, expanded)):
            require(layout.scheme == group.scheme, f"pipelines[{index}].scheme", str(layout.scheme),
                    f"differs from the strategy's {group.scheme}")

    @property
    def devices(self) -> int:
        return self.strategy.devices

    def check(self, model: ModelSpec) -> None:
        """Raise unless every pipeline shards ``model`` and covers all its layers."""
        for index, layout in enumerate(self.pipelines):
            model.check_scheme(layout.scheme, f"pipelines[{index}]")
            require(layout.layers == model.layers, f"pipelines[{index}].stage_layers", layout.stage_layers,
                    f"must sum to model.layers = {model.layers}")

    def __str__(self) -> str:
        return pipelines_spec(self.pipelines)


def pipelines_spec(pipelines: tuple[PipelineSplit, ...]) -> str:
    """The SPEC of ``pipelines``: their :meth:`PipelineSplit.spec` joined by ``+``, runs of equal
    ones as ``xCOUNT``, e.g. ``1|8:16@a100>8:24@h100x2``."""
    runs: list[tuple[str, int]] = []
    for layout in pipelines:
        spec = layout.spec()
        if runs and runs[-1][0] == spec:
            runs[-1] = (spec, runs[-1][1] + 1)
        else:
            runs.append((spec, 1))
    return "+".join(spec if count == 1 else f"{spec}x{count}" for spec, count in runs)


def even_strategy_split(strategy: Strategy, model: ModelSpec) -> StrategySplit:
    """``strategy`` with every pipeline split evenly, a staged one by its stages (a proposal's
    strategies, :meth:`~hydraulis.base.scheme.Scheme.stage_layers`)."""
    layout = StrategySplit(strategy, tuple(PipelineSplit(g.scheme, g.scheme.stage_layers(model.layers))
                                            for g in strategy.expanded()))
    layout.check(model)
    return layout

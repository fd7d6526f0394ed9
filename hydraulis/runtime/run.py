"""A training config resolved into what every rank needs (no torch here).

:func:`resolve_run` reads presets and files, parses every strategy SPEC and draws every step's
lengths once — in the launching process, before any rank starts, so bad input fails fast with a
:class:`~hydraulis.errors.HydraulisError` and the ranks need no file access of their own.
"""

from __future__ import annotations

from dataclasses import dataclass

from hydraulis.artifacts import read_lengths, read_scheme_space
from hydraulis.presets import model_preset
from hydraulis.runtime.config import TrainConfig
from hydraulis.runtime.data import step_lengths, synthetic_lengths
from hydraulis.runtime.layout import StrategyLayout
from hydraulis.runtime.strategy_spec import parse_strategy, parse_strategy_spec, scheme_times
from hydraulis.types import ModelSpec, PipelineModel


@dataclass(frozen=True)
class TrainingRun:
    """Model, strategies in cycle order, each step's sequence lengths, micro-batch capacity and
    the pipeline model of predicted times."""

    model: ModelSpec
    layouts: tuple[StrategyLayout, ...]
    lengths: tuple[tuple[int, ...], ...]
    micro_batch_tokens: int
    pipeline_model: PipelineModel

    @property
    def devices(self) -> int:
        return max(layout.devices for layout in self.layouts)


def resolve_run(config: TrainConfig) -> TrainingRun:
    """Read presets and files, parse every strategy SPEC, draw every step's lengths."""
    model = model_preset(config.model)
    fields = [f"strategies[{i}]" for i in range(len(config.strategies))]
    devices = max([config.nproc] + [sum(g.count * g.scheme.devices for g in parse_strategy_spec(text, field))
                                     for text, field in zip(config.strategies, fields)])
    space = read_scheme_space(config.space_file) if config.space_file else None
    times = scheme_times(model, devices, space)
    layouts = tuple(parse_strategy(text, model, times, config.max_seq_len, field)
                    for text, field in zip(config.strategies, fields))
    seed = config.runtime.seed
    pool = read_lengths(config.lengths_file) if config.lengths_file else synthetic_lengths(config.max_seq_len, seed)
    lengths = step_lengths(pool, config.token_budget, config.steps, config.max_seq_len, seed)
    return TrainingRun(model, layouts, tuple(lengths), config.micro_batch_tokens,
                       space.pipeline_model if space else PipelineModel())

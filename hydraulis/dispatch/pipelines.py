"""A strategy's pipelines as numpy arrays, and the exact times of packed pipelines.

Groups of identical pipelines share one entry of each per-group array; ``group_of[p]`` maps
pipeline ``p`` (in :meth:`Strategy.expanded` order) to its group. A piece of ``s`` tokens costs
``w_g(s) = a_g·s² + b_g·s`` on every stage of a group-``g`` pipeline, a micro-batch ``c_g`` more.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hydraulis.base.scheme_profile import sequence_work_ms
from hydraulis.base.types import PipelineModel, Strategy
from hydraulis.cost import pipeline_times_1f1b


@dataclass(frozen=True)
class PipelineTable:
    """Per-group coefficients ``a, b, c``, stages ``pp``, token ``capacity``, devices per
    pipeline, and ``group_of`` per pipeline."""

    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    pp: np.ndarray
    capacity: np.ndarray
    devices: np.ndarray
    group_of: np.ndarray
    model: PipelineModel

    @classmethod
    def of(cls, strategy: Strategy, model: PipelineModel) -> PipelineTable:
        groups = strategy.pipelines
        return cls(
            a=np.array([g.time.a for g in groups]),
            b=np.array([g.time.b for g in groups]),
            c=np.array([g.time.c for g in groups]),
            pp=np.array([g.scheme.pp for g in groups], dtype=np.int64),
            capacity=np.array([g.max_seq_len for g in groups], dtype=np.int64),
            devices=np.array([g.scheme.devices for g in groups], dtype=np.int64),
            group_of=np.repeat(np.arange(len(groups)), [g.count for g in groups]),
            model=model,
        )

    @property
    def groups(self) -> int:
        return int(self.a.size)

    @property
    def pipelines(self) -> int:
        return int(self.group_of.size)

    def work(self, tokens: np.ndarray) -> np.ndarray:
        """``w_g(s)`` for every group (rows) and piece (columns), ms per stage."""
        return sequence_work_ms(self.a[:, None], self.b[:, None], tokens)


def pipeline_makespans(times: Sequence[np.ndarray], pp: Sequence[int], model: PipelineModel) -> np.ndarray:
    """Exact 1F1B time of each pipeline from its micro-batch times in execution order (0 for a
    pipeline without micro-batches); pipelines with equal ``(pp, v)`` are simulated together."""
    result = np.zeros(len(times))
    together: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i, (t, stages) in enumerate(zip(times, pp)):
        if len(t) and stages == 1:
            result[i] = float(np.sum(t))
        elif len(t):
            together[(int(stages), len(t))].append(i)
    for (stages, _), rows in together.items():
        result[rows] = pipeline_times_1f1b(np.stack([times[i] for i in rows]), stages, model)
    return result

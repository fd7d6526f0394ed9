"""Per-contender figures: the speed-up's worked example and consistency with the runs."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from hydraulis.simulation import Contender, StepOutcome, summarise


def with_times(simulation, times: dict[Contender, tuple[float, ...]]):
    runs = tuple(replace(run, outcomes=tuple(StepOutcome(0, t, t / 2, 1.0) for t in times[run.contender]))
                 for run in simulation.runs)
    steps = simulation.steps[:2]
    return replace(simulation, runs=runs, steps=steps)


def test_speedup_is_the_ratio_of_total_times_worked_example(small_simulation):
    times = {c: (100.0, 300.0) for c in Contender}
    times[Contender.HYDRAULIS] = (80.0, 200.0)
    summaries = summarise(with_times(small_simulation, times))
    by_name = {s.contender: s for s in summaries}
    assert by_name[Contender.HYDRAULIS].speedup == 1.0
    assert by_name[Contender.HOMOGENEOUS_FIXED_PACKING].speedup == pytest.approx(400 / 280)
    assert by_name[Contender.HOMOGENEOUS_FIXED_PACKING].figures.median_ratio == pytest.approx(2.0)


def test_summaries_agree_with_the_runs(small_simulation):
    summaries = summarise(small_simulation)
    assert [s.contender for s in summaries] == list(Contender)
    hydraulis = small_simulation.run(Contender.HYDRAULIS).predicted_ms.mean()
    work = np.array([s.work_bound_ms for s in small_simulation.steps])
    for summary, run in zip(summaries, small_simulation.runs):
        assert summary.figures.mean_ms == pytest.approx(run.predicted_ms.mean())
        assert summary.speedup == pytest.approx(run.predicted_ms.mean() / hydraulis)
        assert summary.figures.median_work_ratio == pytest.approx(np.median(run.predicted_ms / work))
        assert sum(summary.figures.chosen) == len(small_simulation.steps)
        assert summary.figures.p90_ratio >= summary.figures.median_ratio >= 1.0 - 1e-9

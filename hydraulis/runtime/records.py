"""What training reports: one record per step, the log line, the per-step table and the
summary (no torch here).

Summary of a run's steps ``t`` with ``n_t`` loss tokens, measured step time ``m_t`` (the slowest
rank: propagate + compute + reduce + update), time ``w_t`` spent waiting for the plan, and the
plan's predicted step time ``p_t``::

    tokens/s              = Σ n_t / Σ (m_t + w_t)
    prediction error      = mean_t |m_t − p_t| / m_t
    warm prediction error = the same mean over the steps t ∈ W that are not the first of their
                            strategy in the run

The first step under a strategy also builds its process groups and lays out its weights, and
the run's first step warms up allocators and kernels — hundreds of ms on a CPU that no cost
model charges — so ``W`` shows how well the model predicts the steps that follow.

``communicators`` counts the distinct communicators the run's strategies need under aligned
placement (:mod:`hydraulis.placement`), ``bound`` the most any run of their schemes on the same
devices could need; ``synthesised`` the steps that ran a strategy made for them.

Worked example: two steps of 200 and 300 tokens under one strategy measured at 100 and 150 ms
(no wait), predicted 80 and 150 ms: 500 tokens / 0.25 s = 2000 tokens/s, error (0.2 + 0)/2 =
10 %, warm error 0 % (step 2 alone).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from hydraulis.placement import communicator_bound, communicators
from hydraulis.runtime.strategy_spec import parse_strategy_spec
from hydraulis.types import Scheme


@dataclass(frozen=True)
class StepRecord:
    """What a step did. Per pipeline: ``measured_ms`` (compute, forward and backward of its
    micro-batches, slowest rank) and ``predicted_ms`` (the plan's). For the step:
    ``propagate_ms`` (weights to the compute layout, slowest rank), ``step_ms`` (all of it,
    slowest rank), ``reduce_ms`` (gradients to the optimizer layout and the update: what the
    step took beyond propagation and the slowest pipeline) and the plan's
    ``predicted_step_ms`` and ``planning_ms``; ``wait_ms`` is how long the step waited for its
    plan after the previous step ended (0 when planning kept ahead); ``strategy_index`` indexes
    the run's strategies (the proposal's, or the cycled SPECs)."""

    step: int
    strategy: str
    tokens: int
    loss: float
    measured_ms: tuple[float, ...]
    predicted_ms: tuple[float, ...]
    propagate_ms: float
    reduce_ms: float
    step_ms: float
    predicted_step_ms: float
    planning_ms: float
    wait_ms: float = 0.0
    strategy_index: int = 0
    synthesised: bool = False


@dataclass(frozen=True)
class TrainSummary:
    """The module docstring's figures (``warm_prediction_error`` None: every step was the first
    of its strategy), the losses of the first and last steps and how many steps ran each
    strategy."""

    steps: int
    tokens: int
    seconds: float
    tokens_per_s: float
    prediction_error: float
    warm_prediction_error: float | None
    first_loss: float
    last_loss: float
    strategies: tuple[tuple[str, int], ...]
    synthesised: int = 0
    communicators: int = 0
    communicator_bound: int = 0


def summarize(records: Sequence[StepRecord], devices: int = 0) -> TrainSummary:
    """The module docstring's figures; ``devices`` (the world size, default: the most any
    strategy uses) for the communicator bound."""
    tokens = sum(r.tokens for r in records)
    seconds = sum(r.step_ms + r.wait_ms for r in records) / 1e3
    errors = [abs(r.step_ms - r.predicted_step_ms) / r.step_ms for r in records]
    seen: set[str] = set()
    warm = []
    for record, error in zip(records, errors):
        if record.strategy in seen:
            warm.append(error)
        seen.add(record.strategy)
    used = Counter(r.strategy for r in records)
    pipelines = [_schemes(strategy) for strategy in used]
    schemes = {s for strategy in pipelines for s in strategy}
    devices = devices or max(sum(s.devices for s in strategy) for strategy in pipelines)
    return TrainSummary(len(records), tokens, seconds, tokens / seconds, sum(errors) / len(errors),
                        sum(warm) / len(warm) if warm else None, records[0].loss, records[-1].loss,
                        tuple(used.most_common()), sum(r.synthesised for r in records),
                        len(frozenset().union(*(communicators(strategy) for strategy in pipelines))),
                        communicator_bound(schemes, devices))


def _schemes(spec: str) -> list[Scheme]:
    """One scheme per pipeline of a strategy SPEC, in order."""
    return [group.scheme for group in parse_strategy_spec(spec, "strategy") for _ in range(group.count)]


def format_record(record: StepRecord) -> str:
    """The per-step log line (module :mod:`hydraulis.runtime.trainer`)."""
    pipelines = " | ".join(f"{m:.1f}/{p:.1f}" for m, p in zip(record.measured_ms, record.predicted_ms))
    return (f"step {record.step}  strategy {record.strategy}  tokens {record.tokens}  loss {record.loss:.4f}  "
            f"ms measured/predicted {pipelines}  step {record.step_ms:.1f}/{record.predicted_step_ms:.1f}  "
            f"propagate {record.propagate_ms:.1f}  reduce {record.reduce_ms:.1f}  "
            f"plan {record.planning_ms:.1f} wait {record.wait_ms:.1f}")


STEP_COLUMNS = ("step", "strategy", "tokens", "loss", "measured_ms", "predicted_ms", "error", "compute_ms",
                "propagate_ms", "reduce_ms", "plan_ms", "wait_ms")


def step_rows(records: Sequence[StepRecord]) -> list[list[object]]:
    """One row per step under :data:`STEP_COLUMNS` (compute: measured/predicted per pipeline)."""
    return [[r.step, r.strategy, r.tokens, round(r.loss, 4), round(r.step_ms, 1), round(r.predicted_step_ms, 1),
             f"{abs(r.step_ms - r.predicted_step_ms) / r.step_ms:.0%}",
             " ".join(f"{m:.0f}/{p:.0f}" for m, p in zip(r.measured_ms, r.predicted_ms)),
             round(r.propagate_ms, 1), round(r.reduce_ms, 1), round(r.planning_ms, 1), round(r.wait_ms, 1)]
            for r in records]


def summary_line(summary: TrainSummary) -> str:
    used = ", ".join(f"{strategy} ×{count}" for strategy, count in summary.strategies)
    warm = ("" if summary.warm_prediction_error is None
            else f" ({summary.warm_prediction_error:.0%} after each strategy's first step)")
    return (f"summary: {summary.steps} steps, {summary.tokens} tokens in {summary.seconds:.2f} s: "
            f"{summary.tokens_per_s:.0f} tokens/s; mean prediction error {summary.prediction_error:.0%}"
            f"{warm}; "
            f"loss {summary.first_loss:.4f} → {summary.last_loss:.4f}; strategies {used}; "
            f"{summary.synthesised} steps on a strategy made for them; {summary.communicators} distinct "
            f"communicators (bound {summary.communicator_bound})")

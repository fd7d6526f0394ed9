"""What training reports: one record per step, the log line and the summary (no torch here).

The summary's formulas and a worked example: :func:`summarize`."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from hydraulis.base.placement import communicator_bound, communicators
from hydraulis.base.types import Scheme
from hydraulis.cost.pipeline import ScheduledOp
from hydraulis.job.strategy_spec import parse_strategy_spec


@dataclass(frozen=True)
class PipelineOperations:
    """What one pipeline executed in a step (recorded with ``--record-operations``): every
    stage's forwards and backwards in the order they ran, each with its start and end in ms
    since that stage began computing (:mod:`hydraulis.runtime.parallel.operations`), and the
    plan's per-stage time ``t_j`` of each micro-batch in execution order, whose forward the cost
    model predicts to take ``φ·t_j`` and backward ``(1 − φ)·t_j``."""

    pipeline: int
    micro_batch_ms: tuple[float, ...]
    ops: tuple[ScheduledOp, ...]

    def stage_order(self, stage: int) -> list[tuple[str, int]]:
        """``stage``'s operations as (phase, micro-batch) in the order they ran."""
        return [(op.phase.value, op.micro_batch) for op in self.ops if op.stage == stage]


@dataclass(frozen=True)
class StepRecord:
    """What a step did. Per pipeline: ``measured_ms`` (compute, forward and backward of its
    micro-batches, slowest rank) and ``predicted_ms`` (the plan's). For the step:
    ``propagate_ms`` (weights to the compute layout, slowest rank), ``step_ms`` (all of it,
    slowest rank), ``reduce_ms`` (gradients to the optimizer layout and the update: what the
    step took beyond propagation and the slowest pipeline) and the plan's
    ``predicted_step_ms`` and ``planning_ms``; ``wait_ms`` is how long the step waited for its
    plan after the previous step ended (0 when planning kept ahead); ``strategy_index`` indexes
    the run's strategies (the proposal's, or the cycled SPECs; −1 and ``synthesised``: a strategy
    made for the step); ``communicators`` how many
    process groups the step created (:class:`~hydraulis.runtime.rank_map.GroupCache`);
    ``operations``, per pipeline, what its stages executed (empty unless recorded); ``lr`` the
    learning rate of the step's update, ``grad_norm`` the global gradient norm before clipping,
    ``skipped`` whether the update was skipped (a non-finite norm) and ``skipped_steps`` how many
    steps the job has skipped so far, this one included (:mod:`hydraulis.runtime.optimizer.master`);
    ``reduction_inflight_ms`` and ``reduction_hidden_ms`` the reduction's time in flight summed
    over the ranks and the part of it while the same rank's backward computed (:mod:`hydraulis.job.overlap`;
    0 unless recorded); ``exchanged`` False when every rank owned exactly what it computed (a
    one-device job): no gradient exchange and no weight propagation ran, ``propagate_ms`` is 0 but
    for a step whose weights were laid out or loaded, and ``reduce_ms`` is the update alone
    (:mod:`hydraulis.runtime.optimizer.routes`, one owner); of a mixture of experts, ``aux_loss``
    the step's load-balancing loss (a token-weighted mean over layers and documents, before its
    coefficient) and ``tokens_per_expert`` the routed copies each expert received, summed over the
    layers (empty for a dense model)."""

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
    communicators: int = 0
    operations: tuple[PipelineOperations, ...] = ()
    synthesised: bool = False
    lr: float = 0.0
    grad_norm: float = 0.0
    skipped: bool = False
    skipped_steps: int = 0
    reduction_inflight_ms: float = 0.0
    reduction_hidden_ms: float = 0.0
    exchanged: bool = True
    aux_loss: float = 0.0
    tokens_per_expert: tuple[int, ...] = ()

    @property
    def tokens_per_s(self) -> float:
        """``n_t / (m_t + w_t)`` (module docstring)."""
        return self.tokens / ((self.step_ms + self.wait_ms) / 1e3)

    @property
    def reduction_hidden_fraction(self) -> float | None:
        """``hidden / in flight`` of this step's reduction (:mod:`hydraulis.job.overlap`; None:
        not recorded)."""
        return self.reduction_hidden_ms / self.reduction_inflight_ms if self.reduction_inflight_ms > 0 else None


@dataclass(frozen=True)
class TrainSummary:
    """The module docstring's figures (``warm_prediction_error`` None: every step was the first
    of its strategy), the losses of the first and last steps, how many steps ran each
    strategy and how many were skipped (a non-finite gradient norm); ``steady_tokens_per_s``
    None with one step, the MFUs None without the model's size and the devices' peak."""

    steps: int
    tokens: int
    seconds: float
    tokens_per_s: float
    prediction_error: float
    warm_prediction_error: float | None
    warm_error_median: float | None
    warm_error_p90: float | None
    first_loss: float
    last_loss: float
    strategies: tuple[tuple[str, int], ...]
    synthesised: int = 0
    communicators: int = 0
    communicator_bound: int = 0
    skipped: int = 0
    reduction_hidden_fraction: float | None = None
    steady_tokens_per_s: float | None = None
    mfu: float | None = None
    steady_mfu: float | None = None


def summarize(records: Sequence[StepRecord], devices: int = 0, params: int = 0,
              peak_flops: float = 0.0) -> TrainSummary:
    """The run's figures; ``devices`` (the world size, default: the most any strategy uses) for
    the communicator bound and the MFU, with the model's ``params`` and each device's
    ``peak_flops`` (FLOP/s; 0: no MFU).

    Summary of a run's steps ``t`` with ``n_t`` loss tokens, measured step time ``m_t`` (the slowest
    rank: propagate + compute + reduce + update), time ``w_t`` spent waiting for the plan, and the
    plan's predicted step time ``p_t``::

        tokens/s              = Σ n_t / Σ (m_t + w_t)
        steady tokens/s       = the same over the steps after the run's first (its warm-up step)
        MFU                   = 6·P·tokens/s / (D·F)       (P parameters, D devices of peak F FLOP/s;
                                                             the model's FLOPs, attention left out)
        prediction error      = mean_t |m_t − p_t| / m_t
        warm prediction error = the same mean over the steps t ∈ W that are not the first of their
                                strategy in the run; also its median and 90th percentile (nearest
                                rank: the ⌈0.9·|W|⌉-th smallest) over W

    The first step under a strategy also builds its process groups and lays out its weights, and
    the run's first step warms up allocators and kernels — hundreds of ms on a CPU that no cost
    model charges — so ``W`` shows how well the model predicts the steps that follow.

    ``communicators`` counts the distinct communicators the run's strategies need under aligned
    placement (:mod:`hydraulis.base.placement`), ``bound`` the most any run of their schemes on the same
    devices could need; ``synthesised`` the steps that ran a strategy made for them.

    Worked example: two steps of 200 and 300 tokens under one strategy measured at 100 and 150 ms
    (no wait), predicted 80 and 150 ms: 500 tokens / 0.25 s = 2000 tokens/s, steady 300 / 0.15 s =
    2000 tokens/s, error (0.2 + 0)/2 = 10 %, warm error 0 % (step 2 alone; median and p90 0 %); a
    model of P = 10⁹ on D = 1 device of F = 989 TFLOP/s: MFU 6·10⁹·2000 / 989·10¹² ≈ 1.2 %.
    """
    tokens = sum(r.tokens for r in records)
    seconds = sum(r.step_ms + r.wait_ms for r in records) / 1e3
    errors = [abs(r.step_ms - r.predicted_step_ms) / r.step_ms for r in records]
    seen: set[str] = set()
    warm = []
    for record, error in zip(records, errors):
        if record.strategy in seen:
            warm.append(error)
        seen.add(record.strategy)
    after = records[1:]
    steady = sum(r.tokens for r in after) / (sum(r.step_ms + r.wait_ms for r in after) / 1e3) if after else None
    used = Counter(r.strategy for r in records)
    pipelines = [pipeline_schemes(strategy) for strategy in used]
    schemes = {s for strategy in pipelines for s in strategy}
    devices = devices or max(sum(s.devices for s in strategy) for strategy in pipelines)
    return TrainSummary(len(records), tokens, seconds, tokens / seconds, sum(errors) / len(errors),
                        sum(warm) / len(warm) if warm else None, *_median_p90(warm), records[0].loss, records[-1].loss,
                        tuple(used.most_common()), sum(r.synthesised for r in records),
                        len(frozenset().union(*(communicators(strategy) for strategy in pipelines))),
                        communicator_bound(schemes, devices), sum(r.skipped for r in records),
                        _hidden_fraction(records), steady, *(_mfu(rate, params, devices, peak_flops)
                                                             for rate in (tokens / seconds, steady)))


def _mfu(tokens_per_s: float | None, params: int, devices: int, peak_flops: float) -> float | None:
    """``6·P·tokens/s / (D·F)`` (module docstring; None without a rate, a size or a peak)."""
    if tokens_per_s is None or params <= 0 or peak_flops <= 0:
        return None
    return 6 * params * tokens_per_s / (devices * peak_flops)


def _hidden_fraction(records: Sequence[StepRecord]) -> float | None:
    """Σ hidden / Σ in flight over the steps (None: nothing recorded)."""
    inflight = sum(r.reduction_inflight_ms for r in records)
    return sum(r.reduction_hidden_ms for r in records) / inflight if inflight > 0 else None


def _median_p90(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    ordered = sorted(values)
    middle = len(ordered) // 2
    median = ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
    return median, ordered[math.ceil(0.9 * len(ordered)) - 1]


def pipeline_schemes(spec: str) -> list[Scheme]:
    """One scheme per pipeline of a strategy SPEC, in order."""
    return [group.scheme for group in parse_strategy_spec(spec, "strategy") for _ in range(group.count)]


def format_record(record: StepRecord) -> str:
    """The per-step log line (:func:`hydraulis.runtime.trainer.train`)."""
    pipelines = " | ".join(f"{m:.1f}/{p:.1f}" for m, p in zip(record.measured_ms, record.predicted_ms))
    skipped = f"  SKIPPED ({record.skipped_steps} so far)" if record.skipped else ""
    fraction = record.reduction_hidden_fraction
    hidden = "" if fraction is None else f" (hidden {fraction:.2f})"
    return (f"step {record.step}  strategy {record.strategy}  tokens {record.tokens}  loss {record.loss:.4f}  "
            f"lr {record.lr:.3e}  grad_norm {record.grad_norm:.4f}{skipped}  tokens/s {record.tokens_per_s:.0f}  "
            f"ms measured/predicted {pipelines}  step {record.step_ms:.1f}/{record.predicted_step_ms:.1f}  "
            f"propagate {record.propagate_ms:.1f}  "
            f"{'reduce' if record.exchanged else 'update (no exchange)'} {record.reduce_ms:.1f}{hidden}  "
            f"plan {record.planning_ms:.1f} wait {record.wait_ms:.1f}  new groups {record.communicators}"
            + (f"  aux {record.aux_loss:.4f}  tokens/expert {'/'.join(map(str, record.tokens_per_expert))}"
               if record.tokens_per_expert else ""))


def summary_line(summary: TrainSummary) -> str:
    used = ", ".join(f"{strategy} ×{count}" for strategy, count in summary.strategies)
    warm = ("" if summary.warm_prediction_error is None
            else f" ({summary.warm_prediction_error:.0%} after each strategy's first step: median "
                 f"{summary.warm_error_median:.0%}, p90 {summary.warm_error_p90:.0%})")
    steady = ("" if summary.steady_tokens_per_s is None
              else f", {summary.steady_tokens_per_s:.0f} steady (the first, warm-up step excluded)")
    mfu = ("" if summary.mfu is None
           else f"; MFU {summary.mfu:.3f}" + ("" if summary.steady_mfu is None else f", {summary.steady_mfu:.3f} steady"))
    return (f"summary: {summary.steps} steps, {summary.tokens} tokens in {summary.seconds:.2f} s: "
            f"{summary.tokens_per_s:.0f} tokens/s over all steps{steady}{mfu}; "
            f"mean prediction error {summary.prediction_error:.0%}"
            f"{warm}; "
            f"loss {summary.first_loss:.4f} → {summary.last_loss:.4f}; strategies {used}; "
            f"{summary.synthesised} steps on a strategy made for them; {summary.communicators} distinct "
            f"communicators (bound {summary.communicator_bound}); {summary.skipped} steps skipped"
            + ("" if summary.reduction_hidden_fraction is None
               else f"; reduction_hidden_fraction={summary.reduction_hidden_fraction:.2f}"))

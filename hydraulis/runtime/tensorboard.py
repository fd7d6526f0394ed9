"""TensorBoard event files of a training run (``hydraulis train --tensorboard DIR``), written by
rank 0 as each step ends, so a running job can be watched with ``tensorboard --logdir DIR``.

Scalars of step ``t``, among them ``train/tokens_per_s`` ``n_t / (m_t + w_t)``,
``time/prediction_error`` ``|m_t − p_t| / m_t`` and ``reduction/hidden_fraction`` ``H_t / U_t``:
every scalar and symbol in :func:`step_scalars`, the ``run/`` ones :class:`RunRates`; the text
``proposal``: :func:`proposal_markdown`.

Worked example: 500 tokens in a step measured at 200 ms after a 50 ms wait, predicted 150 ms:
2,000 tokens/s, prediction error 25 %; recorded with 40 ms of reduction in flight, 10 of them
hidden: hidden fraction 0.25.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hydraulis.base.types import Proposal
from hydraulis.job.records import StepRecord
from hydraulis.planner.report import STRATEGY_COLUMNS, proposal_heading, strategy_rows

TEXT_TAG = "proposal"


def step_scalars(record: StepRecord) -> dict[str, float]:
    """The scalars of one step (the ``run/`` ones: :class:`RunRates`).

    Scalars of step ``t`` (tag: value), with ``n_t`` loss tokens, measured step time ``m_t``
    (slowest rank), predicted step time ``p_t``, ``w_t`` the wait for the plan and ``U_t``, ``H_t``
    the reduction's time in flight and the part of it hidden behind the backward, summed over the
    ranks (:mod:`hydraulis.job.records`, :mod:`hydraulis.job.overlap`):

    ===================================  ================================================================
    ``train/loss``                       the step's loss
    ``train/tokens_per_s``               ``n_t / (m_t + w_t)``
    ``train/lr``                         the learning rate of the step's update
    ``train/grad_norm``                  the global gradient norm before clipping (inf or NaN: skipped)
    ``train/skipped_steps``              steps skipped so far (a non-finite gradient norm)
    ``time/measured_step_ms``            ``m_t``
    ``time/predicted_step_ms``           ``p_t``
    ``time/prediction_error``            ``|m_t − p_t| / m_t``
    ``time/slowest_pipeline_ms``         the slowest pipeline's compute (0: no pipeline computed)
    ``time/propagate_ms``                the weights' propagation before the compute (slowest rank)
    ``time/reduce_ms``                   the rest: the exposed reduction and the update (design §9.4)
    ``reduction/hidden_fraction``        ``H_t / U_t`` — only for steps that recorded it
                                         (``--record-operations``; ``U_t > 0``)
    ``plan/strategy_index``              the strategy the plan chose (index into the run's strategies;
                                         −1: one made for the step)
    ``plan/planning_ms``                 dispatch time of the step's plan
    ``plan/wait_ms``                     ``w_t``
    ``runtime/communicators_created``    process groups the step created (0 once every rank set was seen)
    ``run/tokens_per_s``                 ``Σ n / Σ (m + w)`` over the steps so far (the summary's)
    ``run/steady_tokens_per_s``          the same without the run's first, warm-up step (from the second)
    ``run/mfu``, ``run/steady_mfu``      ``6·P·tokens/s / (D·F)`` of both (:mod:`hydraulis.job.records`;
                                         only with the model's size and the devices' peak)
    ===================================  ================================================================
    """
    fraction = record.reduction_hidden_fraction
    recorded = {} if fraction is None else {"reduction/hidden_fraction": fraction}
    return {
        "train/loss": record.loss,
        "train/tokens_per_s": record.tokens_per_s,
        "train/lr": record.lr,
        "train/grad_norm": record.grad_norm,
        "train/skipped_steps": float(record.skipped_steps),
        "time/measured_step_ms": record.step_ms,
        "time/predicted_step_ms": record.predicted_step_ms,
        "time/prediction_error": abs(record.step_ms - record.predicted_step_ms) / record.step_ms,
        "plan/strategy_index": float(record.strategy_index),
        "plan/planning_ms": record.planning_ms,
        "plan/wait_ms": record.wait_ms,
        "runtime/communicators_created": float(record.communicators),
        "time/slowest_pipeline_ms": max(record.measured_ms, default=0.0),
        "time/propagate_ms": record.propagate_ms,
        "time/reduce_ms": record.reduce_ms,
        **recorded,
    }


def proposal_markdown(proposals: Sequence[Proposal], cycle: bool) -> str:
    """The strategies a run may use in ``strategy_index`` order: the proposal's, or, when SPECs
    are cycled, the one strategy of each SPEC's proposal.

    Text ``proposal`` (at the run's first step): the strategies the run may use, as the Markdown
    table ``hydraulis propose`` prints, with the planner's explanation.
    """
    strategies = [p.strategies[0] for p in proposals] if cycle else list(proposals[0].strategies)
    rows = [STRATEGY_COLUMNS, ["---"] * len(STRATEGY_COLUMNS), *strategy_rows(strategies)]
    lines = [proposal_heading(proposals[0]) + ("; strategies cycled per step" if cycle else ""), "",
             *("| " + " | ".join(str(cell) for cell in row) + " |" for row in rows)]
    if not cycle and proposals[0].explanation:
        lines += ["", proposals[0].explanation]
    return "\n".join(lines)


class RunRates:
    """The ``run/`` scalars (:func:`step_scalars`) kept as running sums; ``flops_per_token``
    ``6·P`` and ``peak_flops`` ``D·F`` (0: no MFU)."""

    def __init__(self, flops_per_token: float = 0.0, peak_flops: float = 0.0) -> None:
        self.flops_per_token, self.peak_flops = flops_per_token, peak_flops
        self.sums = [[0, 0.0], [0, 0.0]]
        """``[tokens, seconds]`` of every step and of the steps after the first."""
        self.steps = 0

    def add(self, record: StepRecord) -> dict[str, float]:
        for index in (0, 1) if self.steps else (0,):
            self.sums[index][0] += record.tokens
            self.sums[index][1] += (record.step_ms + record.wait_ms) / 1e3
        self.steps += 1
        scalars = {}
        for suffix, (tokens, seconds) in zip(("tokens_per_s", "steady_tokens_per_s"), self.sums):
            if seconds > 0:
                scalars[f"run/{suffix}"] = tokens / seconds
                if self.peak_flops > 0:
                    scalars[f"run/{suffix.replace('tokens_per_s', 'mfu')}"] = (
                        self.flops_per_token * tokens / seconds / self.peak_flops)
        return scalars


class TensorBoardLog:
    """Event files under ``directory``: :meth:`add` writes a step's scalars and flushes them."""

    def __init__(self, directory: str | Path, proposals: Sequence[Proposal], cycle: bool,
                 rates: RunRates | None = None) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(directory))
        self.proposal = proposal_markdown(proposals, cycle)
        self.wrote_text = False
        self.rates = rates or RunRates()

    def add(self, record: StepRecord) -> None:
        if not self.wrote_text:
            self.writer.add_text(TEXT_TAG, self.proposal, record.step)
            self.wrote_text = True
        for tag, value in {**step_scalars(record), **self.rates.add(record)}.items():
            self.writer.add_scalar(tag, value, record.step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()

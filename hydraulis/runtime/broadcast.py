"""Rank 0's step plan to every rank, through ``torch.distributed`` (never through files).

The plan travels as its artifact JSON (:mod:`hydraulis.artifacts.step_plan`, validated again on
arrival) in two broadcasts: a header ``[status, bytes]``, then the UTF-8 payload. Status 1
carries rank 0's planning error instead of a plan, so every rank fails at once with rank 0's
message rather than waiting for a plan that never comes. Reading the header and the payload on the host
are the plan's own waits, before the step begins: the payload's size, then the plan itself.
"""

from __future__ import annotations

import json

import torch

from hydraulis.artifacts import step_plan_from_dict, step_plan_to_dict
from hydraulis.base.types import StepPlan
from hydraulis.runtime.parallel.group import ParallelGroup

PLAN, ERROR = 0, 1


class PlanningFailed(RuntimeError):
    """Rank 0 could not plan the step; the message is rank 0's."""


def share_plan(outcome: StepPlan | BaseException | None, world: ParallelGroup, device: torch.device) -> StepPlan:
    """On rank 0 ``outcome`` is the plan or the exception planning raised (re-raised there after
    it was sent); elsewhere None. Every rank returns the plan or raises :class:`PlanningFailed`."""
    if world.rank == 0:
        failed = isinstance(outcome, BaseException)
        text = f"{type(outcome).__name__}: {outcome}" if failed else json.dumps(step_plan_to_dict(outcome))
        payload = torch.frombuffer(bytearray(text.encode("utf-8")), dtype=torch.uint8).to(device)
        world.broadcast(torch.tensor([ERROR if failed else PLAN, payload.numel()], dtype=torch.long, device=device))
        world.broadcast(payload)
        if failed:
            raise outcome
        return outcome
    header = world.broadcast(torch.zeros(2, dtype=torch.long, device=device)).tolist()
    payload = world.broadcast(torch.empty(header[1], dtype=torch.uint8, device=device))
    text = payload.cpu().numpy().tobytes().decode("utf-8")
    if header[0] == ERROR:
        raise PlanningFailed(f"rank 0 could not plan the step: {text}")
    return step_plan_from_dict(json.loads(text))

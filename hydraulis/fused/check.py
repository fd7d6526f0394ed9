"""An independent checker of fused schedules: it reads only the problem and the task records
(never the simulator's arrays) and lists every rule a schedule breaks.

Rules: every task of every micro-batch appears exactly once; it runs on the device its model's
placement gives its stage; it lasts its forward or backward time; ``F_s`` starts after
``F_{s−1}`` ends, ``B_{S−1}`` after ``F_{S−1}``, ``B_s`` after ``B_{s+1}``; no device runs two
tasks at once; times start at 0; and, given a limit, no device ever holds more memory than it
(a micro-batch holds ``μ`` on a device from its forward's start there to its backward's end).
"""

from __future__ import annotations

from collections.abc import Sequence

from hydraulis.cost.order import Phase
from hydraulis.fused.problem import FusedProblem
from hydraulis.fused.schedule import ScheduledTask

TOLERANCE = 1e-6


def check_schedule(problem: FusedProblem, tasks: Sequence[ScheduledTask],
                   memory_limit: float | None = None) -> list[str]:
    """Every violated rule, one line each; an empty list means the schedule is valid."""
    problems: list[str] = []
    by_key: dict[tuple[int, int, int, int, Phase], ScheduledTask] = {}
    for task in tasks:
        key = (task.model, task.replica, task.micro_batch, task.stage, task.phase)
        if key in by_key:
            problems.append(f"task {_name(key)} appears twice")
        by_key[key] = task
    expected = set(_expected(problem))
    for key in sorted(expected, key=_sortable):
        task = by_key.get(key)
        if task is None:
            problems.append(f"task {_name(key)} is missing")
        else:
            problems += _task_rules(problem, key, task, by_key)
    problems += [f"task {_name(key)} is not a task of the problem" for key in by_key if key not in expected]
    problems += _exclusivity(tasks)
    if memory_limit is not None and not problems:
        peak = peak_memory(problem, tasks)
        if peak > memory_limit + TOLERANCE:
            problems.append(f"peak memory {peak:g} exceeds the limit {memory_limit:g}")
    return problems


def peak_memory(problem: FusedProblem, tasks: Sequence[ScheduledTask]) -> float:
    """Largest memory any device holds at any moment (a sweep over start and end events)."""
    events: dict[int, list[tuple[float, int, float]]] = {}
    for t in tasks:
        mu = problem.models[t.model].memory_per_micro_batch[t.replica][t.micro_batch]
        if t.phase is Phase.FORWARD:
            events.setdefault(t.device, []).append((t.start_ms, 1, mu))
        else:
            events.setdefault(t.device, []).append((t.end_ms, 0, -mu))
    peak = 0.0
    for device_events in events.values():
        held = 0.0
        for _, _, change in sorted(device_events):
            held += change
            peak = max(peak, held)
    return peak


def _expected(problem: FusedProblem):
    for k, model in enumerate(problem.models):
        for r in range(model.replicas):
            for j in range(model.micro_batches[r]):
                for s in range(model.stages):
                    for phase in Phase:
                        yield (k, r, j, s, phase)


def _task_rules(problem: FusedProblem, key, task: ScheduledTask, others) -> list[str]:
    k, r, j, s, phase = key
    model = problem.models[k]
    found = []
    if task.device != model.device(r, s):
        found.append(f"task {_name(key)} runs on device {task.device}, its placement says {model.device(r, s)}")
    duration = (model.forward_ms if phase is Phase.FORWARD else model.backward_ms)[r][j]
    if abs(task.end_ms - task.start_ms - duration) > TOLERANCE:
        found.append(f"task {_name(key)} lasts {task.end_ms - task.start_ms:g} ms, not {duration:g}")
    if task.start_ms < -TOLERANCE:
        found.append(f"task {_name(key)} starts before 0")
    before = _predecessor(model.stages, key)
    if before is not None:
        previous = others.get(before)
        if previous is not None and task.start_ms < previous.end_ms - TOLERANCE:
            found.append(f"task {_name(key)} starts at {task.start_ms:g} before {_name(before)} ends at "
                         f"{previous.end_ms:g}")
    return found


def _predecessor(stages: int, key):
    k, r, j, s, phase = key
    if phase is Phase.FORWARD:
        return (k, r, j, s - 1, Phase.FORWARD) if s > 0 else None
    if s == stages - 1:
        return (k, r, j, s, Phase.FORWARD)
    return (k, r, j, s + 1, Phase.BACKWARD)


def _exclusivity(tasks: Sequence[ScheduledTask]) -> list[str]:
    found = []
    per_device: dict[int, list[ScheduledTask]] = {}
    for t in tasks:
        per_device.setdefault(t.device, []).append(t)
    for device, runs in per_device.items():
        runs.sort(key=lambda t: (t.start_ms, t.end_ms))
        for a, b in zip(runs, runs[1:]):
            if b.start_ms < a.end_ms - TOLERANCE:
                found.append(f"device {device} runs {_name(_key(a))} and {_name(_key(b))} at once")
    return found


def _key(t: ScheduledTask):
    return (t.model, t.replica, t.micro_batch, t.stage, t.phase)


def _sortable(key):
    k, r, j, s, phase = key
    return (k, r, j, s, phase.value)


def _name(key) -> str:
    k, r, j, s, phase = key
    return f"{'F' if phase is Phase.FORWARD else 'B'}{s} of model {k} replica {r} micro-batch {j}"

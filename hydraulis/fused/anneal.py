"""Simulated annealing over per-device task orders (compiled with numba).

State: valid orders with their exact schedule (:mod:`hydraulis.fused.simulate`). A move picks
a device and two positions at most ``window`` apart on it and either swaps the two tasks or
moves one to the other's place (the tasks between shift by one). Half the moves start from the
*critical path* of the current schedule (the chain of tasks each of which starts exactly when
its binding predecessor ends, traced back from the last task): a critical task that waited for
its device is moved earlier, since only such moves can shorten the makespan. The schedule is
re-evaluated incrementally; a deadlocking move, or one that breaks the memory limit, is undone.

**Makespan phase.** Energy ``E = C_max + λ·Σ_d C_d / N`` (``C_d`` a device's last end, λ small:
it breaks the ties of the makespan's wide plateaus in favour of devices that finish earlier);
Metropolis: accept with probability ``min(1, exp(−ΔE / T))``, ``T`` cooling geometrically from
``T_0`` to ``T_1`` over an epoch. **Memory phase.** Energy ``peak + Σ_d peak_d / (N + 1)``,
rejecting every move that lengthens the makespan beyond the phase's cap; half the moves take
a forward at or before the most loaded device's peak and put it after the peak.

The best state seen (lexicographic in makespan, peak memory, sum of per-device peaks) is
copied out. An epoch stops early when the makespan reaches ``target`` (the lower bound).
"""

from __future__ import annotations

import numba
import numpy as np

from hydraulis.fused.simulate import device_peak, makespan_of, propagate, rewind

MAKESPAN = 0
MEMORY = 1


@numba.njit(cache=True)
def seed(value):
    """Seed numba's generator (one per process)."""
    np.random.seed(value)


@numba.njit(cache=True)
def _apply(order, position, a, b, swap):
    """Swap positions ``a`` and ``b``, or move the task at ``a`` to ``b``."""
    if swap:
        ta = order[a]
        tb = order[b]
        order[a] = tb
        order[b] = ta
        position[tb] = a
        position[ta] = b
        return
    t = order[a]
    if a < b:
        for p in range(a, b):
            order[p] = order[p + 1]
            position[order[p]] = p
    else:
        for p in range(a, b, -1):
            order[p] = order[p - 1]
            position[order[p]] = p
    order[b] = t
    position[t] = b


@numba.njit(cache=True)
def _save(order, device_start, pointer, start, end, saved_task, saved_start, saved_end):
    k = 0
    for d in range(device_start.size - 1):
        for p in range(pointer[d], device_start[d + 1]):
            t = order[p]
            saved_task[k] = t
            saved_start[k] = start[t]
            saved_end[k] = end[t]
            k += 1
    return k


@numba.njit(cache=True)
def _device_end_sum(order, device_start, end):
    total = 0.0
    for d in range(device_start.size - 1):
        if device_start[d + 1] > device_start[d]:
            total += end[order[device_start[d + 1] - 1]]
    return total


@numba.njit(cache=True)
def _critical_path(order, position, device_start, device, chain_prev, start, end, path):
    """Fill ``path`` with the critical tasks (last first); returns how many."""
    best = -1
    best_end = -1.0
    for d in range(device_start.size - 1):
        if device_start[d + 1] > device_start[d]:
            t = order[device_start[d + 1] - 1]
            if end[t] > best_end:
                best_end = end[t]
                best = t
    n = 0
    t = best
    while t >= 0:
        path[n] = t
        n += 1
        c = chain_prev[t]
        if c >= 0 and end[c] >= start[t]:
            t = c
            continue
        p = position[t]
        if p > device_start[device[t]] and end[order[p - 1]] >= start[t]:
            t = order[p - 1]
            continue
        t = -1
    return n


@numba.njit(cache=True)
def _pick_move(order, position, device_start, device, chain_prev, start, end, path, path_length, window,
               critical_share):
    """Returns (device, a, b, swap); a == b means no move."""
    devices = device_start.size - 1
    if path_length > 0 and np.random.random() < critical_share:
        t = path[np.random.randint(path_length)]
        d = device[t]
        a = position[t]
        lo = device_start[d]
        if a == lo:
            return d, a, a, True
        b = a - 1 - np.random.randint(window)
        if b < lo:
            b = lo
        return d, a, b, np.random.random() < 0.5
    d = np.random.randint(devices)
    lo = device_start[d]
    hi = device_start[d + 1]
    if hi - lo < 2:
        return d, lo, lo, True
    a = lo + np.random.randint(hi - lo)
    step = 1 + np.random.randint(window)
    b = a + step if np.random.random() < 0.5 else a - step
    if b < lo:
        b = lo
    if b >= hi:
        b = hi - 1
    return d, a, b, np.random.random() < 0.5


@numba.njit(cache=True)
def _peak_move(order, device_start, forward, memory, peaks, window):
    """Move a forward at or before the peak of the most loaded device to after it."""
    d = np.argmax(peaks)
    lo = device_start[d]
    hi = device_start[d + 1]
    held = 0.0
    at = lo
    for p in range(lo, hi):
        t = order[p]
        if forward[t]:
            held += memory[t]
            if held >= peaks[d]:
                at = p
                break
        else:
            held -= memory[t]
    a = at - np.random.randint(window)
    if a < lo:
        a = lo
    b = at + 1 + np.random.randint(window)
    if b >= hi:
        b = hi - 1
    return d, a, b, False


@numba.njit(cache=True)
def _better(m1, p1, s1, m2, p2, s2, eps):
    if m1 < m2 - eps:
        return True
    if m1 > m2 + eps:
        return False
    if p1 < p2 - eps:
        return True
    if p1 > p2 + eps:
        return False
    return s1 < s2 - eps


@numba.njit(cache=True)
def anneal_epoch(order, position, start, end, peaks, device_start, device, duration, chain_prev, chain_next,
                 forward, memory, iterations, t_start, t_end, window, critical_share, tie_weight, memory_limit,
                 phase, makespan_cap, target, best_order, best_state):
    """One epoch of annealing from the (valid, simulated) state passed in; the state is updated
    in place. ``best_state`` = [makespan, peak, peak sum] of ``best_order`` on entry, updated
    when a better state is found. Returns the number of evaluations made."""
    n = order.size
    devices = device_start.size - 1
    pointer = np.zeros(devices, dtype=np.int64)
    stack = np.zeros(devices + n + 1, dtype=np.int64)
    saved_task = np.zeros(n, dtype=np.int64)
    saved_start = np.zeros(n)
    saved_end = np.zeros(n)
    path = np.zeros(n, dtype=np.int64)
    eps = 1e-9
    makespan = makespan_of(order, device_start, end)
    end_sum = _device_end_sum(order, device_start, end)
    peak = peaks.max()
    peak_sum = peaks.sum()
    path_length = _critical_path(order, position, device_start, device, chain_prev, start, end, path)
    if phase == MAKESPAN:
        energy = makespan + tie_weight * end_sum / devices
    else:
        energy = peak + peak_sum / (devices + 1)
    ratio = (t_end / t_start) ** (1.0 / max(iterations - 1, 1))
    temperature = t_start
    evaluations = 0
    for _ in range(iterations):
        temperature *= ratio
        if makespan <= target + eps and phase == MAKESPAN:
            break
        if phase == MEMORY and np.random.random() < critical_share:
            d, a, b, swap = _peak_move(order, device_start, forward, memory, peaks, window)
        else:
            d, a, b, swap = _pick_move(order, position, device_start, device, chain_prev, start, end, path,
                                       path_length, window, critical_share)
        if a == b:
            continue
        _apply(order, position, a, b, swap)
        lo = device_start[d]
        hi = device_start[d + 1]
        new_peak_d = device_peak(order, lo, hi, forward, memory)
        if new_peak_d > memory_limit + eps:
            _apply(order, position, b, a, swap)
            continue
        first = a if a < b else b
        rewind(order, device_start, start, end, pointer, d, first)
        saved = _save(order, device_start, pointer, start, end, saved_task, saved_start, saved_end)
        evaluations += 1
        valid = propagate(order, position, device_start, device, duration, chain_prev, chain_next, pointer, start,
                          end, stack)
        accept = False
        new_makespan = 0.0
        new_end_sum = 0.0
        old_peak_d = peaks[d]
        if valid:
            new_makespan = makespan_of(order, device_start, end)
            if phase == MAKESPAN:
                new_end_sum = _device_end_sum(order, device_start, end)
                new_energy = new_makespan + tie_weight * new_end_sum / devices
            else:
                peaks[d] = new_peak_d
                new_energy = peaks.max() + peaks.sum() / (devices + 1)
                peaks[d] = old_peak_d
            if phase == MEMORY and new_makespan > makespan_cap + eps:
                accept = False
            elif new_energy <= energy:
                accept = True
            else:
                accept = np.random.random() < np.exp((energy - new_energy) / temperature)
        if accept:
            energy = new_energy
            makespan = new_makespan
            end_sum = new_end_sum
            peaks[d] = new_peak_d
            peak = peaks.max()
            peak_sum = peaks.sum()
            path_length = _critical_path(order, position, device_start, device, chain_prev, start, end, path)
            if _better(makespan, peak, peak_sum, best_state[0], best_state[1], best_state[2], eps):
                best_state[0] = makespan
                best_state[1] = peak
                best_state[2] = peak_sum
                best_order[:] = order
        else:
            for k in range(saved):
                t = saved_task[k]
                start[t] = saved_start[k]
                end[t] = saved_end[k]
            _apply(order, position, b, a, swap)
    return evaluations

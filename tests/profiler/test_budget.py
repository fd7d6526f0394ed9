from dataclasses import replace
from pathlib import Path

from hydraulis.artifacts import read_scheme_space
from hydraulis.base.types import LOSS_CHUNK_TOKENS, OptimizerLayout, Recompute, Scheme
from hydraulis.cost.memory import scheme_capacities
from hydraulis.profiler.budget import under_budget
from hydraulis.sharding.activations import (
    stage_activation_bytes,
    stage_bytes_per_token,
)

SPACES = Path(__file__).resolve().parents[2] / "examples" / "spaces"
LAYOUT = OptimizerLayout(4, 1, 1)


def test_the_longest_sequence_is_what_the_budget_leaves_to_the_accounted_activations():
    space = under_budget(read_scheme_space(SPACES / "tiny_cpu.json"), 16_000_000, 1_600_000)
    capacity = {c.profile.scheme: c for c in scheme_capacities(space, LAYOUT, loss_chunk=0)}
    one = capacity[Scheme(1, 1, 1)]
    layers = (Recompute.NONE,) * 4
    per_token = stage_bytes_per_token(space.model, Scheme(1, 1, 1), layers, 0, 4)
    assert one.memory.activation_per_token == per_token
    free = 16_000_000 - 1_600_000 - one.memory.states - one.memory.gradient
    assert one.max_seq_len == int(free // per_token)
    held = next(c.max_seq_len for c in scheme_capacities(space, LAYOUT) if c.profile.scheme == Scheme(1, 1, 1))
    assert held > one.max_seq_len
    assert (stage_activation_bytes(space.model, Scheme(1, 1, 1), layers, 0, held, 4, LOSS_CHUNK_TOKENS) <= free
            < stage_activation_bytes(space.model, Scheme(1, 1, 1), layers, 0, held + 1, 4, LOSS_CHUNK_TOKENS))
    assert capacity[Scheme(2, 2, 1)].max_seq_len > capacity[Scheme(2, 1, 1)].max_seq_len > one.max_seq_len


def test_the_example_space_is_the_measured_one_under_16_mb():
    measured = read_scheme_space(SPACES / "tiny_cpu.json")
    committed = read_scheme_space(SPACES / "tiny_cpu_16mb.json")
    derived = under_budget(measured, 16_000_000, 1_600_000)
    assert replace(committed, provenance=derived.provenance) == derived
    assert [p.time for p in committed.profiles] == [p.time for p in measured.profiles]

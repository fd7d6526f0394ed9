"""One small simulation shared by the tests: LLaMA-7B original pool, 16 devices, 4 steps."""

from __future__ import annotations

import pytest

from hydraulis.artifacts import read_lengths
from hydraulis.planner import PlannerConfig
from hydraulis.simulation import SimulationConfig, simulate
from tests.conftest import imported_space
from tests.dispatch.helpers import EXAMPLES

LENGTHS = EXAMPLES / "data" / "longtail.txt"


def small_config(steps: int = 4) -> SimulationConfig:
    return SimulationConfig(PlannerConfig(devices=16, devices_per_node=8, token_budget=40_000, max_seq_len=16_384,
                                          strategies=3, steps=12), steps=steps)


@pytest.fixture(scope="session")
def small_space():
    return imported_space("7b", devices=16)


@pytest.fixture(scope="session")
def lengths():
    return read_lengths(LENGTHS)


@pytest.fixture(scope="session")
def small_simulation(small_space, lengths):
    return simulate(small_space, lengths, small_config())

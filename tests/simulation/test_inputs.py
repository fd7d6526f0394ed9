"""Where a simulation's scheme space and workload come from (hydraulis.io.simulation_inputs)."""

from __future__ import annotations

import pytest

from hydraulis.artifacts import write_scheme_space
from hydraulis.base.errors import HydraulisError
from hydraulis.io.simulation_inputs import scheme_space_for, workload_lengths
from tests.data.conftest import write_code_corpus
from tests.simulation.conftest import LENGTHS


def test_analytic_bundled_and_file_spaces(tmp_path, small_space):
    analytic, facts = scheme_space_for(None, "llama-13b", "a100-80g", 64, None)
    assert (analytic.model.name, analytic.cluster.devices, analytic.cluster.devices_per_node) == ("llama-13b", 64, 8)
    assert facts == {"source": "analytic", "model": "llama-13b", "device": "a100-80g", "segments": False}
    bundled, facts = scheme_space_for("bundled:7b", "ignored", "ignored", 16, None)
    assert bundled.profiles == small_space.profiles and facts["source"] == "bundled:7b"
    path = tmp_path / "space.json"
    write_scheme_space(path, small_space)
    read, facts = scheme_space_for(str(path), "ignored", "ignored", 16, None)
    assert read.profiles == small_space.profiles and facts["source"] == str(path)


def test_lengths_corpus_and_synthetic_workloads(tmp_path):
    lengths, facts = workload_lengths(str(LENGTHS), None, 10, 0)
    assert lengths.size == 20_000 and facts == {"source": "lengths", "path": str(LENGTHS)}
    corpus = write_code_corpus(tmp_path / "code.jsonl")
    measured, facts = workload_lengths(None, str(corpus), 10, 0, tmp_path / "cache")
    assert measured.size > 6 and facts["source"] == "corpus" and facts["tokens"] == int(measured.sum())
    synthetic, facts = workload_lengths(None, None, 500, 3)
    assert synthetic.size == 500 and facts["source"] == "synthetic" and facts["seed"] == 3
    assert (synthetic == workload_lengths(None, None, 500, 3)[0]).all()


def test_two_workloads_at_once_are_refused():
    with pytest.raises(HydraulisError) as error:
        workload_lengths(str(LENGTHS), "corpus.jsonl", 10, 0)
    assert error.value.field == "--corpus"

"""The simulation's artifacts (hydraulis.artifacts.simulation) and plots (hydraulis.viz.simulation)."""

from __future__ import annotations

import csv
import json

from hydraulis.artifacts import read_proposal
from hydraulis.artifacts.simulation import write_simulation
from hydraulis.simulation import Contender, summarise
from hydraulis.viz.simulation import draw_simulation


def test_artifacts_hold_every_step_and_contender_with_the_config(small_simulation, small_space, tmp_path):
    summaries = summarise(small_simulation)
    config = {**small_simulation.config.to_dict(), "space": {"source": "test"}}
    files = write_simulation(tmp_path, small_simulation, summaries, config, created="2026-01-01T00:00:00+00:00",
                             tool_version="test")
    document = json.loads(files.document.read_text())
    assert (document["kind"], document["schema_version"]) == ("simulation", 1)
    assert document["config"]["space"] == {"source": "test"}
    assert [c["name"] for c in document["contenders"]] == [c.value for c in Contender]
    assert len(document["steps"]) == 4 and set(document["steps"][0]["plans"]) == {c.value for c in Contender}
    assert set(document["communicators"]) == {"proposal", "run", "bound"}
    assert set(document["bounds"]["gap"]) == set(document["steps"][0]["gap"]) >= {"work", "bubbles", "switch"}
    assert document["steps"][0]["tight_bound_ms"] >= document["steps"][0]["work_bound_ms"]
    with files.steps.open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 4 * len(Contender)
    first = rows[0]
    assert float(first["ratio"]) == float(first["predicted_ms"]) / float(first["lower_bound_ms"])
    with files.summary.open() as handle:
        assert [r["contender"] for r in csv.DictReader(handle)] == [c.value for c in Contender]
    for path in files.proposals:
        read_proposal(path, small_space)
    assert len(files.proposals) == 1 + sum(c.family.value != "proposal" for c in Contender)


def test_plots_are_written(small_simulation, tmp_path):
    paths = draw_simulation(small_simulation, summarise(small_simulation), tmp_path)
    assert [p.name for p in paths] == ["step_times.png", "planning_latency.png", "strategy_usage.png"]
    for path in paths:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000

"""The measurement cache: lines found again by key, a cut-short last line skipped."""

import json
from dataclasses import replace

import pytest

from hydraulis.artifacts.measurements import MeasurementCache
from hydraulis.base.errors import HydraulisError
from hydraulis.base.presets import model_preset
from hydraulis.base.types import Scheme
from hydraulis.profiler.measurement import (
    Environment,
    Measurement,
    MeasureSettings,
    MeasureStatus,
    ReductionMeasurement,
)
from hydraulis.profiler.sweep import Statistic, SweepPoint

SETTINGS = MeasureSettings(model_preset("tiny"), Environment("cpu", "test cpu", "2.0", "fp32", 1, 4), 3, 1)
POINT = SweepPoint(Scheme(1, 2, 1), 1, (32, 32))


def _ok(point=POINT, time=12.5):
    return Measurement(point, MeasureStatus.OK, time, 4.0, 1e6, (12.0, 12.5, 13.0))


def test_an_appended_point_is_found_by_a_new_reader(tmp_path):
    MeasurementCache(tmp_path).append(_ok(), SETTINGS)
    found = MeasurementCache(tmp_path).find(POINT, SETTINGS)
    assert found == _ok()


@pytest.mark.parametrize("change", [
    lambda s: replace(s, repeats=5),
    lambda s: replace(s, environment=replace(s.environment, torch_version="2.1")),
    lambda s: replace(s, environment=replace(s.environment, device_name="other cpu")),
    lambda s: replace(s, model=replace(s.model, hidden=128, heads=4)),
    lambda s: replace(s, environment=replace(s.environment, fill_node=True)),
    lambda s: replace(s, statistic=Statistic.MEDIAN),
])
def test_a_point_measured_under_other_settings_is_not_found(tmp_path, change):
    MeasurementCache(tmp_path).append(_ok(), SETTINGS)
    assert MeasurementCache(tmp_path).find(POINT, change(SETTINGS)) is None


def test_a_median_key_is_the_key_of_lines_written_before_the_statistic_was_chosen(tmp_path):
    median = replace(SETTINGS, statistic=Statistic.MEDIAN)
    cache = MeasurementCache(tmp_path)
    cache.append(_ok(), median)
    cache.append(_ok(), SETTINGS)
    keys = [entry["key"] for entry in MeasurementCache(tmp_path).entries.values()]
    assert [key.get("statistic") for key in keys] == [None, "min"]


def test_the_layer_count_is_not_part_of_the_key(tmp_path):
    MeasurementCache(tmp_path).append(_ok(), SETTINGS)
    assert MeasurementCache(tmp_path).find(POINT, replace(SETTINGS, model=replace(SETTINGS.model, layers=32)))


def test_a_line_cut_short_by_a_kill_is_skipped(tmp_path):
    cache = MeasurementCache(tmp_path)
    cache.append(_ok(), SETTINGS)
    other = SweepPoint(Scheme(1, 1, 1), 2, (64,))
    with cache.path.open("a") as handle:
        handle.write('{"schema_version": 1, "kind": "profile_meas')
    reread = MeasurementCache(tmp_path)
    assert reread.find(POINT, SETTINGS) is not None and reread.find(other, SETTINGS) is None


def test_a_broken_line_in_the_middle_is_an_error_naming_it(tmp_path):
    cache = MeasurementCache(tmp_path)
    cache.path.write_text("not json\n")
    cache.append(_ok(), SETTINGS)
    with pytest.raises(HydraulisError, match="measurements.jsonl:1"):
        MeasurementCache(tmp_path)


def test_out_of_memory_is_kept(tmp_path):
    MeasurementCache(tmp_path).append(Measurement(POINT, MeasureStatus.OUT_OF_MEMORY), SETTINGS)
    assert MeasurementCache(tmp_path).find(POINT, SETTINGS).status is MeasureStatus.OUT_OF_MEMORY


def test_a_reduction_is_found_beside_the_points_and_keyed_by_its_devices_and_layers(tmp_path):
    reduction = ReductionMeasurement(4, 8.0, 3.0, 5.0, (7.5, 8.0, 9.0))
    cache = MeasurementCache(tmp_path)
    cache.append(_ok(), SETTINGS)
    cache.append_reduction(reduction, SETTINGS)
    again = MeasurementCache(tmp_path)
    assert again.find_reduction(4, SETTINGS) == reduction and again.find(POINT, SETTINGS) == _ok()
    assert again.find_reduction(2, SETTINGS) is None
    deeper = replace(SETTINGS, model=replace(SETTINGS.model, layers=SETTINGS.model.layers + 1))
    assert again.find_reduction(4, deeper) is None


def test_a_reduction_keeps_its_communicator_time_and_overlap_and_an_older_line_has_neither(tmp_path):
    measured = ReductionMeasurement(4, 8.0, 3.0, 5.0, (8.0,), communicator_ms=2.5, overlap=0.4)
    MeasurementCache(tmp_path).append_reduction(measured, SETTINGS)
    assert MeasurementCache(tmp_path).find_reduction(4, SETTINGS) == measured
    line = json.loads((tmp_path / "measurements.jsonl").read_text())
    del line["communicator_ms"], line["overlap"]
    (tmp_path / "measurements.jsonl").write_text(json.dumps(line) + "\n")
    older = MeasurementCache(tmp_path).find_reduction(4, SETTINGS)
    assert older.communicator_ms is None and older.overlap is None


def test_a_scheme_with_other_options_is_another_point(tmp_path):
    MeasurementCache(tmp_path).append(_ok(), SETTINGS)
    sequence_parallel = replace(POINT, scheme=replace(POINT.scheme, sp=True))
    assert MeasurementCache(tmp_path).find(sequence_parallel, SETTINGS) is None
    MeasurementCache(tmp_path).append(_ok(sequence_parallel, 9.0), SETTINGS)
    again = MeasurementCache(tmp_path)
    assert again.find(sequence_parallel, SETTINGS).time_ms == 9.0 and again.find(POINT, SETTINGS).time_ms == 12.5
    assert '"options": ["sp"]' in again.path.read_text().splitlines()[-1]


def test_a_pipeline_points_handoff_is_kept_and_an_older_line_has_none(tmp_path):
    pipeline = SweepPoint(Scheme(1, 1, 2), 1, (32,))
    measured = replace(_ok(pipeline), handoff_ms=3.5)
    MeasurementCache(tmp_path).append(measured, SETTINGS)
    assert MeasurementCache(tmp_path).find(pipeline, SETTINGS) == measured
    line = json.loads((tmp_path / "measurements.jsonl").read_text())
    del line["handoff_ms"]
    (tmp_path / "measurements.jsonl").write_text(json.dumps(line) + "\n")
    assert MeasurementCache(tmp_path).find(pipeline, SETTINGS).handoff_ms is None

"""Without a space, a job's SPECs are priced with the analytic model of the device it runs on:
the detected GPU's preset (an unknown GPU: the fallback, named in a warning), or the CPU's."""

import logging

import pytest

from hydraulis.base.presets import FALLBACK_GPU, device_names, gpu_preset
from hydraulis.job.config import TrainConfig
from hydraulis.runtime.run import resolve_run, timing_device


@pytest.mark.parametrize("name, preset", [("NVIDIA H200", "h200"), ("NVIDIA H100 80GB HBM3", "h100-80g"),
                                          ("NVIDIA A100-SXM4-40GB", "a100-40g"), ("NVIDIA A100-SXM4-80GB", "a100-80g"),
                                          ("NVIDIA A800-SXM4-80GB", "a800-80g"), ("NVIDIA GeForce RTX 4090", None)])
def test_gpu_names_map_to_device_presets(name, preset):
    assert gpu_preset(name) == preset
    assert preset is None or preset in device_names()


def test_an_unknown_gpu_is_priced_as_the_fallback_with_a_warning_naming_it(caplog):
    with caplog.at_level(logging.WARNING):
        assert timing_device("NVIDIA GeForce RTX 4090").name == FALLBACK_GPU
    assert FALLBACK_GPU in caplog.text and "RTX 4090" in caplog.text
    assert timing_device(None).name == "cpu"


def test_a_cuda_job_without_a_space_predicts_with_its_gpus_preset():
    config = TrainConfig("tiny", ("1,1,1",), 1, token_budget=256, max_seq_len=128)
    on_cpu, on_h200 = resolve_run(config), resolve_run(config, "NVIDIA H200")
    assert on_h200.device.name == "h200" and on_cpu.device.name == "cpu"
    cpu_ms = on_cpu.planning.proposals[0].strategies[0].strategy.pipelines[0].time.b
    h200_ms = on_h200.planning.proposals[0].strategies[0].strategy.pipelines[0].time.b
    assert h200_ms < cpu_ms / 1000

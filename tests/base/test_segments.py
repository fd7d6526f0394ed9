"""Stages composed from segments: the docstring's example, and the runtime's own accounting."""

import itertools

import pytest

from hydraulis.base.presets import device_preset, model_preset
from hydraulis.base.segments import Block, Segments, compose_profile, in_flight_bytes_per_token, stage_block
from hydraulis.base.stages import even_split
from hydraulis.base.types import Cluster, ModelSpec, Recompute, Scheme, TimeCoefficients
from hydraulis.profiler.analytic import analytic_segments
from hydraulis.sharding.activations import stage_bytes_per_token as runtime_bytes_per_token


def test_worked_example_of_the_module_docstring():
    layer = Block(TimeCoefficients(0.0, 1.0, 0.0), 10.0)
    full = Block(TimeCoefficients(0.0, 1.5, 0.0), 1.0)
    ends = Block(kept_bytes_per_token=1.0)
    segments = Segments(1, 1, False, layer, layer, full, first=ends, last=ends)
    model = ModelSpec("m", 4, 8, 2, 2, 16, 32)
    profile = compose_profile(segments, model, Scheme(1, 1, 2, recompute=Recompute.FULL, recompute_layers=(2, 0)),
                              8, 0)
    assert profile.time.b == 3.0 and profile.activation_bytes_per_token == 21.0


@pytest.mark.parametrize("model_name, device, cp, tp, sp, pp", [
    ("tiny", "cpu", 1, 2, True, 3), ("tiny", "cpu", 2, 1, False, 2), ("llama-7b", "h100-80g", 2, 8, True, 4),
    ("llama-70b", "h100-80g", 1, 16, False, 4),
])
def test_analytic_segments_compose_the_runtime_accounting_of_every_stage(model_name, device, cp, tp, sp, pp):
    model, spec = model_preset(model_name), device_preset(device)
    segments = analytic_segments(model, spec, Cluster(64, 8, device), cp, tp, sp)
    split = even_split(model.layers, pp)
    dtype_bytes = 4 if device == "cpu" else 2
    schemes = [Scheme(cp, tp, pp, sp, recompute) for recompute in Recompute]
    schemes += [Scheme(cp, tp, pp, sp, Recompute.FULL, counts)
                for counts in itertools.islice(itertools.product(*(range(n + 1) for n in split)), 1, 30)]
    for scheme in schemes:
        for stage, count in enumerate(split):
            composed = in_flight_bytes_per_token(stage_block(segments, scheme, stage, count), pp - stage)
            runtime = runtime_bytes_per_token(model, scheme, scheme.stage_recompute(stage, count), stage, dtype_bytes)
            assert composed == pytest.approx(runtime, rel=1e-12), (scheme, stage)

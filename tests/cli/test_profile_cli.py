"""``hydraulis profile`` and ``hydraulis space compare``: bad input, a killed sweep resumed, the
schemes sharing measuring rounds or not, and the committed measured space going through ``space show``, ``propose`` and ``plan-step``."""

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hydraulis.artifacts import read_scheme_space, write_lengths
from hydraulis.base.presets import device_preset
from hydraulis.base.types import SpaceSource
from tests.cli.helpers import hydraulis, hydraulis_process

ROOT = Path(__file__).resolve().parents[2]
TINY_CPU = ROOT / "examples" / "spaces" / "tiny_cpu.json"


@pytest.mark.parametrize("args, needle", [
    (["--model", "gpt-9"], "model: 'gpt-9' is not a preset"),
    (["--model", "tiny", "--tp", "3"], "scheme.tp: 3 does not divide model.heads = 4"),
    (["--model", "tiny", "--seq-lens", ""], "seq_lens: '' must"),
    (["--model", "tiny", "--seq-lens", "64"], "at least 2 token counts"),
    (["--model", "tiny", "--pp", "8"], "exceeds model.layers = 4"),
    (["--model", "tiny", "--max-procs", "99"], "max_procs: 99 exceeds the"),
    (["--model", "tiny", "--cp", "2", "--tp", "4", "--pp", "2"], "all need more than the"),
    (["--model", "tiny", "--variants", "all", "--options", "sp"], "--variants: 'all' measures every option"),
    (["--model", "tiny", "--variants", "all", "--cp", "2", "--tp", "4", "--pp", "2"], "all need more than the"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, args, needle):
    base = {"--seq-lens": "64,128", "--max-procs": "2", "-o": str(tmp_path / "s.json")}
    flags = dict(zip(args[::2], args[1::2]))
    result = hydraulis("profile", *[x for pair in {**base, **flags}.items() for x in pair])
    assert result.returncode == 2, result.stdout
    assert "Traceback" not in result.stderr
    assert needle in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def _profile_arguments(cache, output):
    return ["profile", "--model", "tiny", "--cp", "1", "--tp", "1,2", "--pp", "1", "--seq-lens", "32:256", "--repeats",
            "2", "--warmup", "0", "--check-full-stage", "--cache", str(cache), "-o", str(output)]


def _lines(path, kind="profile_measurement"):
    """The cache's complete lines of ``kind`` (points; ``profile_reduction``: the reduction)."""
    if not path.is_file():
        return []
    return [line for line in path.read_text().splitlines() if line.endswith("}") and json.loads(line)["kind"] == kind]


KILL_AFTER_FIRST_LINE = """
import os
import signal

import hydraulis.artifacts.measurements as measurements

append = measurements.MeasurementCache.append


def append_then_die(self, measurement, settings):
    append(self, measurement, settings)
    os.killpg(os.getpgrp(), signal.SIGKILL)


measurements.MeasurementCache.append = append_then_die
"""
"""``sitecustomize`` for the sweep's processes (the measuring ranks are spawned interpreters):
the first measured point written to the cache kills the sweep's whole process group — a kill
at a known point, not a race with the sweep."""


@pytest.mark.distributed
def test_a_killed_sweep_resumes_without_measuring_finished_points(tmp_path):
    cache, output, hook = tmp_path / "cache", tmp_path / "space.json", tmp_path / "hook"
    measurements = cache / "measurements.jsonl"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(KILL_AFTER_FIRST_LINE)
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")])))
    sweep = subprocess.run([sys.executable, "-m", "hydraulis", *_profile_arguments(cache, output)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environment, start_new_session=True)
    assert sweep.returncode == -signal.SIGKILL
    finished = len(_lines(measurements))
    assert 0 < finished and not output.exists()

    resumed = hydraulis(*_profile_arguments(cache, output))
    assert resumed.returncode == 0, resumed.stderr
    total = len(_lines(measurements))
    assert finished < total
    assert f"reused {finished} from the cache, measured {total - finished}" in resumed.stdout
    assert len(_lines(measurements, "profile_reduction")) == 1 and "reduce_gbps" in resumed.stdout
    space = read_scheme_space(output)
    assert space.provenance.source is SpaceSource.MEASURED and len(space.profiles) == 2
    reduction = json.loads(_lines(measurements, "profile_reduction")[0])
    assert space.communicator_ms == reduction["communicator_ms"] > 0
    assert space.reduce_overlap == reduction["overlap"] and 0 <= reduction["overlap"] <= 1
    assert "held-out med" in resumed.stdout and "extrap. med" in resumed.stdout
    shown = hydraulis("space", "show", str(output))
    assert shown.returncode == 0 and "(measured)" in shown.stdout


@pytest.mark.distributed
def test_variants_profile_the_segments_and_report_held_out_stages_and_the_time_saved(tmp_path):
    output = tmp_path / "space.json"
    done = hydraulis("profile", "--model", "tiny", "--variants", "all", "--cp", "1", "--tp", "1", "--pp", "1,2",
                     "--seq-lens", "32,64", "--repeats", "1", "--warmup", "0", "--device", "cpu", "--max-procs", "2",
                     "-o", str(output))
    assert done.returncode == 0, done.stderr
    assert "held-out composed-stage error: median over schemes" in done.stdout
    assert "saved ≈" in done.stdout and "as whole stages would take" in done.stdout
    space = read_scheme_space(output)
    assert [s.key for s in space.segments] == [(1, 1, False)]
    assert {str(p.scheme) for p in space.profiles} == {"(1,1,1)", "(1,1,2)"}
    assert {p.scheme.pp: p.fit.points for p in space.profiles} == {1: 4, 2: 8}
    shown = hydraulis("space", "show", str(output), "--format", "json", "--longest", "4096")
    assert shown.returncode == 0 and any(r["recompute"] == "full" for r in json.loads(shown.stdout))


def test_the_committed_space_goes_through_show_propose_and_plan_step(tmp_path):
    space = read_scheme_space(TINY_CPU)
    assert space.provenance.source is SpaceSource.MEASURED and space.model.name == "tiny"
    assert all(p.fit is not None for p in space.profiles)
    assert hydraulis("space", "show", str(TINY_CPU)).returncode == 0
    lengths = tmp_path / "lengths.txt"
    write_lengths(lengths, [16 + (37 * i) % 300 for i in range(400)] + [480, 500])
    proposal = tmp_path / "proposal.json"
    proposed = hydraulis("propose", "--space", str(TINY_CPU), "--devices", "4", "--token-budget", "2048",
                         "--max-seq-len", "512", "--lengths", str(lengths), "--strategies", "2", "--steps", "8",
                         "--time-limit", "5", "-o", str(proposal))
    assert proposed.returncode == 0, proposed.stderr
    batch = tmp_path / "batch.txt"
    write_lengths(batch, [300, 120, 64, 40, 500, 33, 250, 90])
    planned = hydraulis("plan-step", "--proposal", str(proposal), "--lengths", str(batch), "--format", "json")
    assert planned.returncode == 0, planned.stderr


def test_compare_measured_with_analytic(tmp_path):
    analytic = tmp_path / "analytic.json"
    assert hydraulis("space", "analytic", "--model", "tiny", "--device", "cpu", "--devices", "4", "--cp", "1,2",
                     "--tp", "1,2,4", "--pp", "1,2", "-o", str(analytic)).returncode == 0
    compared = hydraulis("space", "compare", str(TINY_CPU), str(analytic), "--lengths", "64,512")
    assert compared.returncode == 0, compared.stderr
    assert "s=64" in compared.stdout and "median |d|" in compared.stdout
    assert len(compared.stdout.splitlines()) == 5 + len(read_scheme_space(TINY_CPU).profiles)


@pytest.mark.distributed
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="4 processes need 2 cores (2 processes per core)")
def test_a_context_and_pipeline_parallel_scheme_on_four_processes(tmp_path):
    output = tmp_path / "space.json"
    done = hydraulis("profile", "--model", "tiny", "--cp", "2", "--tp", "1,2", "--pp", "2", "--seq-lens", "16,32,64",
                     "--repeats", "1", "--warmup", "1", "--device", "cpu", "--max-procs", "4", "-o", str(output))
    assert done.returncode == 0, done.stderr
    assert "skipped (2,2,2): needs 8 devices, only 4 here" in done.stdout
    profile = read_scheme_space(output).profiles[0]
    assert (profile.scheme.cp, profile.scheme.tp, profile.scheme.pp) == (2, 1, 2)
    assert profile.fit.points == 3 and profile.activation_bytes_per_token > 0
    assert read_scheme_space(output).pipeline_model.p2p_ms != device_preset("cpu").collective_latency_us / 1e3


def _round_order(stderr: str) -> list[tuple[int, str]]:
    """(round, scheme) in the order the progress bar announced them, repeats collapsed."""
    order = []
    for found in re.finditer(r"round (\d+)/\d+ (\(\d+,\d+,\d+\))", stderr):
        step = (int(found.group(1)), found.group(2))
        if not order or order[-1] != step:
            order.append(step)
    return order


@pytest.mark.distributed
@pytest.mark.parametrize("interleave, expected", [
    ("scheme", [(1, "(1,1,1)"), (2, "(1,1,1)"), (1, "(1,2,1)"), (2, "(1,2,1)")]),
    ("sweep", [(1, "(1,1,1)"), (1, "(1,2,1)"), (2, "(1,1,1)"), (2, "(1,2,1)")]),
])
def test_interleave_says_which_schemes_share_the_rounds(tmp_path, interleave, expected):
    done = hydraulis_process("profile", "--model", "tiny", "--cp", "1", "--tp", "1,2", "--pp", "1", "--seq-lens",
                             "32,64", "--repeats", "1", "--warmup", "1", "--device", "cpu", "--max-procs", "2",
                             "--interleave", interleave, "-o", str(tmp_path / "space.json"))  # rank 0's progress bar
    assert done.returncode == 0, done.stderr
    assert _round_order(done.stderr) == expected
    assert len(read_scheme_space(tmp_path / "space.json").profiles) == 2

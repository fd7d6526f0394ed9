"""``hydraulis data build-stdlib`` and ``hydraulis data synth``."""

import json

from hydraulis.artifacts.lengths import read_lengths
from tests.cli.helpers import hydraulis
from tests.data.test_sources import make_tree


def test_build_stdlib_from_a_root_reports_files_bytes_and_skipped(tmp_path):
    result = hydraulis("data", "build-stdlib", "--root", str(make_tree(tmp_path / "lib")), "-o", str(tmp_path / "c.jsonl"))
    assert result.returncode == 0, result.stderr
    assert "3 files, 12 bytes, 1 undecodable skipped" in result.stdout
    manifest = json.loads((tmp_path / "c.manifest.json").read_text())
    assert manifest["skipped_undecodable"] == {"count": 1, "paths": ["pkg/latin.py"]}
    assert len((tmp_path / "c.jsonl").read_text().splitlines()) == 3


def test_synth_writes_a_lengths_file_the_planner_reads(tmp_path):
    result = hydraulis("data", "synth", "--docs", "5000", "--tail-share", "0.05", "--seed", "3",
                       "-o", str(tmp_path / "l.txt"))
    assert result.returncode == 0, result.stderr
    lengths = read_lengths(tmp_path / "l.txt")
    assert lengths.size == 5000
    assert f"mean {lengths.mean():.0f}" in result.stdout and "of tokens" in result.stdout


def test_bad_input_exits_2_with_one_line(tmp_path):
    for args, needle in [
        (["data", "build-stdlib", "--root", str(tmp_path / "nope"), "-o", str(tmp_path / "c.jsonl")], "does not exist"),
        (["data", "synth", "--docs", "0", "-o", str(tmp_path / "l.txt")], "--docs: '0' must be between 1 and 16777216"),
        (["data", "synth", "--docs", "9", "--tail-alpha", "-1", "-o", str(tmp_path / "l.txt")], "--tail-alpha: '-1' must be > 0 and <= 100"),
    ]:
        result = hydraulis(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert "Traceback" not in result.stderr and needle in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1

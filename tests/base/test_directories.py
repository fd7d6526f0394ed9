"""Directory outputs presented whole (hydraulis.base.directories): the previous complete directory or
the new complete one, never a mix — also when ``simulate -o`` is killed at any point."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hydraulis.base.directories import (
    MARKER,
    complete_files,
    marked_directory,
    staged_directory,
)
from tests.cli.helpers import hydraulis

ROOT = Path(__file__).resolve().parents[2]
SIMULATE = ["simulate", "--space", "bundled:7b", "--devices", "16", "--token-budget", "40000", "--max-seq-len",
            "16384", "--strategies", "2", "--time-limit", "2", "--planner-steps", "8", "--no-progress", "--steps",
            "1", "--lengths", str(ROOT / "examples" / "data" / "longtail.txt"), "--no-plots"]

KILLED = """
import os, sys
import hydraulis.base.directories as directories
import hydraulis.base.files as files
from hydraulis.cli import main

point, count = sys.argv[1], int(sys.argv[2])
calls = {"n": 0}

def dying(original):
    def call(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == count:
            os._exit(9)
        return original(*args, **kwargs)
    return call

if point == "write":
    files.fsync = dying(files.fsync)
elif point == "swap":
    directories._swap = dying(directories._swap)
else:
    directories.fsync_folder = dying(directories.fsync_folder)
sys.exit(main(sys.argv[3:]))
"""


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_staged_directory_replaces_the_old_one_whole_and_keeps_a_users_file(tmp_path):
    out = tmp_path / "out"
    with staged_directory(out) as folder:
        (folder / "a.txt").write_text("1")
        (folder / "sub").mkdir()
        (folder / "sub" / "b.txt").write_text("1")
    (out / "notes.txt").write_text("mine")
    with staged_directory(out) as folder:
        (folder / "a.txt").write_text("2")
    assert snapshot(out) == {"a.txt": b"2", "notes.txt": b"mine", MARKER: (out / MARKER).read_bytes()}
    assert complete_files(out) == ["a.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_an_error_leaves_the_old_directory_untouched(tmp_path):
    out = tmp_path / "out"
    with staged_directory(out) as folder:
        (folder / "a.txt").write_text("1")
    before = snapshot(out)
    with pytest.raises(RuntimeError), staged_directory(out) as folder:
        (folder / "a.txt").write_text("2")
        raise RuntimeError("the writer failed")
    assert snapshot(out) == before
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_a_directory_not_ours_is_written_in_place_and_marked(tmp_path):
    (tmp_path / "input.txt").write_text("keep")
    with staged_directory(tmp_path) as folder:
        assert folder == tmp_path
        (folder / "a.txt").write_text("1")
    assert (tmp_path / "input.txt").read_text() == "keep"
    assert complete_files(tmp_path) == ["a.txt"]


def test_a_marked_directory_has_no_marker_until_the_block_ends(tmp_path):
    with marked_directory(tmp_path) as folder:
        (folder / "a.txt").write_text("1")
    with pytest.raises(RuntimeError), marked_directory(tmp_path) as folder:
        assert not (folder / MARKER).exists()
        raise RuntimeError("the job failed")
    assert complete_files(tmp_path) is None


@pytest.mark.slow
@pytest.mark.parametrize(("point", "count"), [("write", 1), ("write", 4), ("write", 8), ("swap", 1),
                                              ("after-swap", 1)])
def test_simulate_killed_at_any_point_leaves_a_complete_directory(tmp_path, point, count):
    out = tmp_path / "out"
    environment = dict(os.environ, PYTHONPATH=str(ROOT))
    first = hydraulis(*SIMULATE, "--seed", "1", "-o", str(out))
    assert first.returncode == 0, first.stderr
    old = snapshot(out)
    killed = subprocess.run([sys.executable, "-c", KILLED, point, str(count), *SIMULATE, "--seed", "2", "-o", str(out)],
                            capture_output=True, text=True, timeout=300, env=environment, check=False)
    assert killed.returncode == 9, killed.stderr
    now = snapshot(out)
    if now != old:  # the new directory, whole: every file it lists, nothing of the old run
        assert sorted(now) == sorted([*complete_files(out), MARKER])
        assert json.loads(now["simulation.json"])["config"]["dispatch"]["seed"] == 2
        assert all(now[name] != old.get(name) for name in ("simulation.json", "proposal.json", "steps.csv"))
    assert point != "after-swap" or now != old
    assert point == "after-swap" or now == old

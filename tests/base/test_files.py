"""Atomic outputs: a failed write — a full disk, an error in the writer, a kill between open and
rename — leaves the previous file intact, and the error names the path."""

import errno
import subprocess
import sys

import pytest

from hydraulis.artifacts.record import read_json, write_json
from hydraulis.base.errors import HydraulisError
from hydraulis.base.files import atomic_write, write_text_atomically


def test_a_full_disk_leaves_the_old_file_intact_and_names_it(tmp_path):
    path = tmp_path / "proposal.json"
    write_json(path, {"valid": True})
    with pytest.raises(HydraulisError, match=f"output: '{path}' could not be written"):
        with atomic_write(path) as handle:
            handle.write('{"cut": ')
            raise OSError(errno.ENOSPC, "No space left on device")
    assert read_json(path) == {"valid": True}
    assert [p.name for p in tmp_path.iterdir()] == ["proposal.json"]


def test_a_writer_error_leaves_the_old_file_intact(tmp_path):
    path = tmp_path / "lengths.txt"
    write_text_atomically(path, "1\n2\n")
    with pytest.raises(ZeroDivisionError):
        with atomic_write(path) as handle:
            handle.write("3\n")
            raise ZeroDivisionError
    assert path.read_text() == "1\n2\n"


def test_a_kill_between_open_and_rename_leaves_the_old_file_intact(tmp_path):
    path = tmp_path / "plan.json"
    write_json(path, {"old": 1})
    killed = subprocess.run([sys.executable, "-c", f"""
import os, signal
from hydraulis.base.files import atomic_write
with atomic_write({str(path)!r}) as handle:
    handle.write('{{"new": ')
    handle.flush()
    os.kill(os.getpid(), signal.SIGKILL)
"""])
    assert killed.returncode == -9
    assert read_json(path) == {"old": 1}


def test_a_write_replaces_the_whole_file(tmp_path):
    path = tmp_path / "out" / "space.json"
    write_json(path, {"a": list(range(1000))})
    write_json(path, {"b": 1})
    assert read_json(path) == {"b": 1}

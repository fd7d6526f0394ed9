
import numpy as np
import pytest

from hydraulis.artifacts import read_lengths, write_lengths
from hydraulis.base.errors import HydraulisError


@pytest.mark.parametrize("name", ["l.txt", "l.txt.gz", "l.npy"])
def test_round_trip(tmp_path, name):
    lengths = np.array([5, 70000, 1, 300])
    write_lengths(tmp_path / name, lengths)
    assert read_lengths(tmp_path / name).tolist() == lengths.tolist()


def test_comments_and_blank_lines_are_skipped(tmp_path):
    (tmp_path / "l.txt").write_text("# lengths\n12\n\n  7 \n")
    assert read_lengths(tmp_path / "l.txt").tolist() == [12, 7]


@pytest.mark.parametrize("content, needle", [
    ("", "holds no lengths"),
    ("12\nabc\n", "l.txt:2: 'abc' is not an integer"),
    ("12\n-4\n", "l.txt:2: -4 must be between 1 and 2147483647"),
    ("0\n", "l.txt:1: 0 must be between 1 and 2147483647"),
])
def test_bad_text_files(tmp_path, content, needle):
    (tmp_path / "l.txt").write_text(content)
    with pytest.raises(HydraulisError, match=needle):
        read_lengths(tmp_path / "l.txt")


def test_bad_npy_and_missing(tmp_path):
    np.save(tmp_path / "f.npy", np.array([1.5, 2.0]))
    with pytest.raises(HydraulisError, match="must hold a 1-D integer array"):
        read_lengths(tmp_path / "f.npy")
    with pytest.raises(HydraulisError, match="does not exist"):
        read_lengths(tmp_path / "none.txt")
    (tmp_path / "bad.txt.gz").write_bytes(b"not gzip")
    with pytest.raises(HydraulisError, match="cannot be read as text"):
        read_lengths(tmp_path / "bad.txt.gz")

import pytest

from hydraulis.base.errors import HydraulisError
from hydraulis.data.fingerprint import ContentHash
from hydraulis.data.sources import collect_sources


def make_tree(root):
    (root / "pkg" / "site-packages").mkdir(parents=True)
    (root / "b.py").write_text("b = 2\n")
    (root / "pkg" / "a.py").write_text("a = 1\n")
    (root / "pkg" / "empty.py").write_text("")
    (root / "pkg" / "latin.py").write_bytes(b"# \xe9t\xe9\n")
    (root / "pkg" / "site-packages" / "third.py").write_text("x = 3\n")
    (root / "notes.txt").write_text("not python\n")
    return root


def test_files_sorted_undecodable_skipped_and_counted_excluded_dirs_left_out(tmp_path):
    found = collect_sources(make_tree(tmp_path), "**/*.py", ("site-packages",))
    assert found.paths == ("b.py", "pkg/a.py", "pkg/empty.py")
    assert found.texts == ("b = 2\n", "a = 1\n", "")
    assert found.skipped == ("pkg/latin.py",)
    assert found.files == 3 and found.bytes == 12


def test_content_hash_frames_each_document(tmp_path):
    found = collect_sources(make_tree(tmp_path), "**/*.py", ("site-packages",))
    expected = ContentHash()
    for text in found.texts:
        expected.add(text.encode())
    assert found.content_hash == expected.hexdigest()
    joined, split = ContentHash(), ContentHash()
    joined.add(b"ab"), joined.add(b"c")
    split.add(b"a"), split.add(b"bc")
    assert joined.hexdigest() != split.hexdigest()


@pytest.mark.parametrize("make, pattern, needle", [
    (lambda t: t / "missing", "**/*", "does not exist or is not a directory"),
    (lambda t: make_tree(t), "**/*.rs", r"holds no readable UTF-8 files matching '\*\*/\*.rs'"),
    (lambda t: make_tree(t), "pkg/latin.py", r"\(1 undecodable skipped\)"),
    (lambda t: make_tree(t), "/abs/*.py", "must be a glob relative to the directory"),
])
def test_bad_directories(tmp_path, make, pattern, needle):
    with pytest.raises(HydraulisError, match=needle):
        collect_sources(make(tmp_path), pattern)

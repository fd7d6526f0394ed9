import json

import pytest

from hydraulis.artifacts.corpus_manifest import read_corpus_manifest
from hydraulis.base.errors import HydraulisError
from hydraulis.data.corpus import CorpusSource, load_corpus
from hydraulis.io.stdlib_corpus import build_stdlib_corpus, manifest_path, stdlib_root
from tests.data.test_sources import make_tree


def test_build_from_a_tree_writes_jsonl_and_a_manifest_whose_hash_matches_the_loaded_corpus(tmp_path):
    root = make_tree(tmp_path / "lib")
    output = tmp_path / "out" / "corpus.jsonl"
    manifest = build_stdlib_corpus(output, root, created="2026-01-01T00:00:00+00:00", tool_version="test")
    rows = [json.loads(line) for line in output.read_text().splitlines()]
    assert [r["path"] for r in rows] == ["b.py", "pkg/a.py", "pkg/empty.py"]
    assert manifest.skipped_undecodable == ("pkg/latin.py",) and manifest.files == 3
    assert read_corpus_manifest(manifest_path(output)) == manifest
    loaded = load_corpus(CorpusSource(output), cache_dir=tmp_path / "cache")
    assert loaded.content_hash == manifest.content_hash
    assert (loaded.documents, loaded.empty, loaded.bytes) == (3, 1, manifest.bytes)


def test_output_must_not_be_a_directory(tmp_path):
    with pytest.raises(HydraulisError, match="is a directory"):
        build_stdlib_corpus(tmp_path, make_tree(tmp_path / "lib"), created="", tool_version="test")


def test_the_running_interpreters_stdlib(tmp_path):
    """The real corpus: ~1,790 files in CPython 3.11, a handful not UTF-8 (a few seconds)."""
    manifest = build_stdlib_corpus(tmp_path / "stdlib.jsonl", created="", tool_version="test")
    total = sum(1 for p in stdlib_root().rglob("*.py") if not {"site-packages", "dist-packages"} & set(p.parts))
    assert manifest.files + len(manifest.skipped_undecodable) == total
    assert manifest.files > 1000 and manifest.bytes > 10_000_000
    assert all(path.startswith("test") for path in manifest.skipped_undecodable)
    assert not any("site-packages" in line for line in manifest.skipped_undecodable)

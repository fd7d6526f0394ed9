import json

import pytest

from hydraulis.artifacts.corpus_manifest import corpus_manifest_to_dict, read_corpus_manifest, write_corpus_manifest
from hydraulis.base.errors import HydraulisError
from hydraulis.data.sources import CorpusManifest

MANIFEST = CorpusManifest(root="/lib/python3.11", pattern="**/*.py", excluded_dirs=("site-packages",),
                          python="3.11.7", files=2, bytes=30, skipped_undecodable=("test/bad.py",),
                          content_hash="sha256:00", text_field="text", created="2026-01-01T00:00:00+00:00",
                          tool_version="test", command="hydraulis data build-stdlib -o c.jsonl")


def test_round_trip(tmp_path):
    write_corpus_manifest(tmp_path / "m.json", MANIFEST)
    assert read_corpus_manifest(tmp_path / "m.json") == MANIFEST


@pytest.mark.parametrize("mutate, needle", [
    (lambda d: d.__setitem__("kind", "proposal"), "kind: 'proposal' is not a corpus_manifest artifact"),
    (lambda d: d.__setitem__("schema_version", 9), "schema_version: 9 is not supported"),
    (lambda d: d.__setitem__("files", -1), "files: -1 must be >= 0"),
    (lambda d: d["skipped_undecodable"].__setitem__("count", 3), "skipped_undecodable.count: 3 does not match"),
    (lambda d: d.pop("content_hash"), "content_hash: None is missing"),
])
def test_bad_manifests(tmp_path, mutate, needle):
    document = corpus_manifest_to_dict(MANIFEST)
    mutate(document)
    (tmp_path / "m.json").write_text(json.dumps(document))
    with pytest.raises(HydraulisError, match=needle):
        read_corpus_manifest(tmp_path / "m.json")

"""The corpus-manifest artifact: what a built corpus (e.g. the stdlib corpus) holds.

Layout (``schema_version`` 1)::

    {"schema_version": 1, "kind": "corpus_manifest", "root", "pattern", "excluded_dirs": [...],
     "python", "files", "bytes", "skipped_undecodable": {"count", "paths": [...]},
     "content_hash": "sha256:…", "text_field", "created", "tool_version", "command"}
"""

from __future__ import annotations

from pathlib import Path

from hydraulis.artifacts.record import Record, check_header, read_json, write_json
from hydraulis.base.errors import HydraulisError
from hydraulis.data.sources import CorpusManifest

KIND = "corpus_manifest"
SCHEMA_VERSION = 1


def corpus_manifest_to_dict(manifest: CorpusManifest) -> dict:
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND,
        "root": manifest.root,
        "pattern": manifest.pattern,
        "excluded_dirs": list(manifest.excluded_dirs),
        "python": manifest.python,
        "files": manifest.files,
        "bytes": manifest.bytes,
        "skipped_undecodable": {"count": len(manifest.skipped_undecodable),
                                "paths": list(manifest.skipped_undecodable)},
        "content_hash": manifest.content_hash,
        "text_field": manifest.text_field,
        "created": manifest.created,
        "tool_version": manifest.tool_version,
        "command": manifest.command,
    }


def corpus_manifest_from_dict(document: object) -> CorpusManifest:
    record = Record(document)
    check_header(record, KIND, (SCHEMA_VERSION,))
    skipped = record.sub("skipped_undecodable")
    paths = skipped.strs("paths")
    if skipped.int("count") != len(paths):
        raise HydraulisError("skipped_undecodable.count", skipped.int("count"),
                             f"does not match the {len(paths)} paths listed")
    for key in ("files", "bytes"):
        if record.int(key) < 0:
            raise HydraulisError(key, record.int(key), "must be >= 0")
    return CorpusManifest(
        root=record.str("root"), pattern=record.str("pattern"), excluded_dirs=record.strs("excluded_dirs"),
        python=record.str("python"), files=record.int("files"), bytes=record.int("bytes"),
        skipped_undecodable=paths, content_hash=record.str("content_hash"), text_field=record.str("text_field"),
        created=record.str("created"), tool_version=record.str("tool_version"), command=record.str("command", ""),
    )


def write_corpus_manifest(path: str | Path, manifest: CorpusManifest) -> None:
    write_json(path, corpus_manifest_to_dict(manifest))


def read_corpus_manifest(path: str | Path) -> CorpusManifest:
    return corpus_manifest_from_dict(read_json(path))

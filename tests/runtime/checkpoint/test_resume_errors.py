"""A checkpoint whose manifest cannot be read is skipped, and the warning names the file."""

import logging

import pytest

from hydraulis.base.errors import HydraulisError
from hydraulis.runtime.checkpoint.resume import find_checkpoint


def test_a_manifest_that_is_not_utf8_is_skipped_naming_its_file(tmp_path, caplog):
    folder = tmp_path / "step-00000004"
    folder.mkdir()
    (folder / "manifest.json").write_bytes(b'{"kind": "checkpoint", "note": "\xff\xfe"}')
    with caplog.at_level(logging.WARNING), pytest.raises(HydraulisError) as failed:
        find_checkpoint(tmp_path)
    assert "checkpoint step-00000004 skipped: manifest.json is not UTF-8 text" in caplog.text
    assert "step-00000004' manifest.json is not UTF-8 text" in str(failed.value)

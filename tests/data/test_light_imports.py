"""The data modules import ``datasets``, ``tokenizers`` and ``matplotlib`` only when used, so the
CLI starts fast and the loader serves the runtime without them."""

import subprocess
import sys

from tests.test_imports import BLOCKER


def test_data_modules_and_cli_import_without_datasets_tokenizers_or_matplotlib():
    modules = ["hydraulis.data." + m for m in ("corpus", "sources", "tokenizer", "loader", "analysis", "synth",
                                               "measure")] + ["hydraulis.io.stdlib_corpus", "hydraulis.io.length_report",
                                                              "hydraulis.cli"]
    code = (BLOCKER + "".join(f"import {m}\n" for m in modules)
            + "assert 'matplotlib' not in sys.modules, 'matplotlib imported'\nprint('ok')")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"

import json

import numpy as np

from hydraulis.artifacts.lengths import read_lengths
from hydraulis.data.analysis import AnalysisConfig
from hydraulis.data.synth import synth_lengths
from hydraulis.io.length_report import write_report

PNG = b"\x89PNG\r\n\x1a\n"


def test_report_files(tmp_path):
    lengths = synth_lengths(3000, seed=2)
    analysis, files = write_report(tmp_path / "report", lengths, AnalysisConfig(65536, 16384, steps=50),
                                   (("lengths", "synthetic"),), created="2026-01-01T00:00:00+00:00",
                                   tool_version="test", command="hydraulis analyze")
    assert read_lengths(files.lengths).tolist() == lengths.tolist()
    assert [p.name for p in files.plots] == ["length_histogram.png", "token_share.png", "square_share.png",
                                             "step_max.png"]
    assert all(p.read_bytes().startswith(PNG) and p.stat().st_size > 10_000 for p in files.plots)
    summary = files.summary.read_text()
    tail = analysis.lengths
    assert f"{tail.tail_token_share * 100:.1f} % of the tokens" in summary
    assert f"{tail.tail_square_share * 100:.1f} % of Σs²" in summary
    assert all(f"]({p.name})" in summary for p in files.plots)
    document = json.loads(files.analysis.read_text())
    assert (document["kind"], document["schema_version"]) == ("length_analysis", 1)
    assert document["config"]["token_budget"] == 65536 and document["source"] == {"lengths": "synthetic"}
    assert document["lengths"]["tail"]["token_share"] == tail.tail_token_share
    assert len(document["steps"]["maxima"]) == 50 and max(document["steps"]["maxima"]) <= 16384
    assert np.isclose(sum(b["token_share"] for b in document["lengths"]["buckets"]), 1.0)

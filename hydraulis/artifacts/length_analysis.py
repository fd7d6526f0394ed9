"""The length-analysis artifact written beside the plots of ``hydraulis analyze``.

Layout (``schema_version`` 1)::

    {"schema_version": 1, "kind": "length_analysis",
     "config": {"token_budget", "max_seq_len", "steps", "seed", "tail_threshold", "bucket_edges"},
     "source": {<label>: <value>, ...},
     "lengths": {"documents", "tokens", "mean", "min", "max", "percentiles": {"50": …},
                 "tail": {"threshold", "document_share", "token_share", "square_share"},
                 "buckets": [{"low", "high", "documents", "tokens", "document_share",
                              "token_share", "square_share"}]},
     "steps": {"steps", "epochs", "maximum_percentiles": {…}, "share_above_tail",
               "square_sum_spread", "maxima": [...]},
     "created", "tool_version", "command"}

Shares are fractions in [0, 1]; ``high`` is ``null`` for the open last bucket.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from hydraulis.artifacts.record import write_json
from hydraulis.data.analysis import LengthAnalysis

KIND = "length_analysis"
SCHEMA_VERSION = 1


def length_analysis_to_dict(analysis: LengthAnalysis, source: tuple[tuple[str, object], ...], *,
                            created: str, tool_version: str, command: str = "") -> dict:
    lengths, steps = analysis.lengths, analysis.steps
    config = asdict(analysis.config)
    config["bucket_edges"] = list(analysis.config.bucket_edges)
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND,
        "config": config,
        "source": dict(source),
        "lengths": {
            "documents": lengths.documents,
            "tokens": lengths.tokens,
            "mean": lengths.mean,
            "min": lengths.minimum,
            "max": lengths.maximum,
            "percentiles": {f"{p:g}": v for p, v in lengths.percentiles},
            "tail": {"threshold": lengths.tail_threshold, "document_share": lengths.tail_document_share,
                     "token_share": lengths.tail_token_share, "square_share": lengths.tail_square_share},
            "buckets": [asdict(b) for b in lengths.buckets],
        },
        "steps": {
            "steps": steps.steps,
            "epochs": steps.epochs,
            "maximum_percentiles": {f"{p:g}": v for p, v in steps.maximum_percentiles()},
            "share_above_tail": steps.share_above(lengths.tail_threshold),
            "square_sum_spread": steps.square_sum_spread(),
            "maxima": steps.maxima.tolist(),
        },
        "created": created,
        "tool_version": tool_version,
        "command": command,
    }


def write_length_analysis(path: str | Path, analysis: LengthAnalysis, source: tuple[tuple[str, object], ...], *,
                          created: str, tool_version: str, command: str = "") -> None:
    write_json(path, length_analysis_to_dict(analysis, source, created=created, tool_version=tool_version,
                                             command=command))

"""The length report: a lengths file the planner reads, four PNG plots, a markdown summary
and the analysis as a versioned JSON artifact, all in one directory.

=========================  ==================================================================
file                       contents
=========================  ==================================================================
``lengths.txt``            one document length (tokens) per line — ``read_lengths`` input
``length_histogram.png``   documents per length, log-spaced bins, both axes logarithmic
``token_share.png``        share of documents and of tokens per length bucket
``square_share.png``       share of tokens and of Σs² (attention work) per length bucket
``step_max.png``           each simulated step's longest sequence, over steps and as a histogram
``summary.md``             the figures in words and tables, with the plots
``analysis.json``          everything above as numbers (:mod:`hydraulis.artifacts.length_analysis`)
=========================  ==================================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hydraulis.artifacts.length_analysis import write_length_analysis
from hydraulis.artifacts.lengths import write_lengths
from hydraulis.base.errors import require
from hydraulis.base.files import atomic_path, write_text_atomically
from hydraulis.data.analysis import (
    AnalysisConfig,
    LengthAnalysis,
    LengthSummary,
    StepSummary,
    analyze_lengths,
    token_label,
)

Facts = tuple[tuple[str, object], ...]
DPI = 110


@dataclass(frozen=True)
class ReportFiles:
    directory: Path
    lengths: Path
    summary: Path
    analysis: Path
    plots: tuple[Path, ...]


def write_report(directory: str | Path, lengths: np.ndarray, config: AnalysisConfig, source: Facts, *,
                 created: str, tool_version: str, command: str = "") -> tuple[LengthAnalysis, ReportFiles]:
    """Analyse ``lengths`` under ``config`` and write the report into ``directory``."""
    analysis = analyze_lengths(lengths, config)
    directory = Path(directory)
    require(not directory.is_file(), "output", str(directory), "is a file; give a directory for the report")
    directory.mkdir(parents=True, exist_ok=True)
    files = ReportFiles(
        directory=directory, lengths=directory / "lengths.txt", summary=directory / "summary.md",
        analysis=directory / "analysis.json",
        plots=tuple(directory / name for name in
                    ("length_histogram.png", "token_share.png", "square_share.png", "step_max.png")),
    )
    write_lengths(files.lengths, lengths)
    _plot_histogram(files.plots[0], lengths, analysis)
    _plot_shares(files.plots[1], analysis.lengths, ("documents", "tokens"))
    _plot_shares(files.plots[2], analysis.lengths, ("tokens", "Σs²"))
    _plot_steps(files.plots[3], analysis)
    write_text_atomically(files.summary, summary_markdown(analysis, source, files))
    write_length_analysis(files.analysis, analysis, source, created=created, tool_version=tool_version,
                          command=command)
    return analysis, files


def summary_markdown(analysis: LengthAnalysis, source: Facts, files: ReportFiles) -> str:
    lengths, steps, config = analysis.lengths, analysis.steps, analysis.config
    tail = token_label(lengths.tail_threshold)
    lines = ["# Length analysis", "", "## Source", "", "| | |", "|---|---|"]
    lines += [f"| {label} | {_value(value)} |" for label, value in source]
    percentile_heads = [f"p{p:g}" for p, _ in lengths.percentiles]
    lines += ["", "## Lengths (tokens per document)", "",
              "| documents | tokens | mean | min | " + " | ".join(percentile_heads) + " | max |",
              "|---" * (len(percentile_heads) + 5) + "|",
              f"| {lengths.documents} | {lengths.tokens} | {lengths.mean:.1f} | {lengths.minimum} | "
              + " | ".join(str(v) for _, v in lengths.percentiles) + f" | {lengths.maximum} |", "",
              f"**Tail (longer than {tail} tokens):** {_pct(lengths.tail_document_share)} of the documents hold "
              f"{_pct(lengths.tail_token_share)} of the tokens and {_pct(lengths.tail_square_share)} of Σs² "
              "(the attention work).", "",
              "| length (tokens) | documents | share of documents | share of tokens | share of Σs² |", "|---|---|---|---|---|"]
    lines += [f"| {b.label} | {b.documents} | {_pct(b.document_share)} | {_pct(b.token_share)} | {_pct(b.square_share)} |"
              for b in lengths.buckets]
    maxima = steps.maximum_percentiles()
    lines += ["", f"## Steps (token budget T = {config.token_budget}, maximum sequence length "
                  f"S = {config.max_seq_len})", "",
              f"{steps.steps} steps over {steps.epochs} epoch(s) (seed {config.seed}); documents longer than S "
              "are cut into pieces of S tokens.", "",
              "| longest sequence per step | " + " | ".join(f"p{p:g}" for p, _ in maxima) + " | max |",
              "|---" * (len(maxima) + 2) + "|",
              "| tokens | " + " | ".join(str(v) for _, v in maxima) + f" | {int(steps.maxima.max())} |", "",
              f"{_pct(steps.share_above(lengths.tail_threshold))} of the steps hold a sequence longer than {tail} "
              f"tokens. Σs² per step varies by a factor of {steps.square_sum_spread():.1f} between its 10th and "
              "90th percentile: the sampling imbalance one static parallel layout has to absorb.", "",
              "## Plots", ""]
    lines += [f"![{p.stem}]({p.name})" for p in files.plots]
    lines += ["", "## Files", "",
              f"- `{files.lengths.name}`: one document length per line, the planner's length distribution",
              f"- `{files.analysis.name}`: all figures above as JSON, with the configuration", ""]
    return "\n".join(lines)


def _plot_histogram(path: Path, lengths: np.ndarray, analysis: LengthAnalysis) -> None:
    figure, axes = _figure()
    summary, config = analysis.lengths, analysis.config
    bins = np.geomspace(1, summary.maximum * 1.05 + 1, 60)
    axes.hist(lengths, bins=bins, color="tab:blue", alpha=0.85)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.axvline(summary.tail_threshold, color="tab:red", linestyle="--",
                 label=f"tail > {token_label(summary.tail_threshold)}: {_pct(summary.tail_token_share)} of tokens")
    axes.axvline(config.max_seq_len, color="black", linestyle=":", label=f"S = {token_label(config.max_seq_len)}")
    axes.set_xlabel("document length (tokens, log scale)")
    axes.set_ylabel("documents (log scale)")
    axes.set_title(f"Length distribution: {summary.documents} documents, mean {summary.mean:.0f}, "
                   f"max {summary.maximum}")
    axes.legend()
    _save(figure, path)


def _plot_shares(path: Path, summary: LengthSummary, series: tuple[str, str]) -> None:
    values = {
        "documents": [b.document_share for b in summary.buckets],
        "tokens": [b.token_share for b in summary.buckets],
        "Σs²": [b.square_share for b in summary.buckets],
    }
    colors = {"documents": "tab:gray", "tokens": "tab:blue", "Σs²": "tab:red"}
    tails = {"documents": summary.tail_document_share, "tokens": summary.tail_token_share,
             "Σs²": summary.tail_square_share}
    figure, axes = _figure()
    positions = np.arange(len(summary.buckets))
    for offset, name in zip((-0.2, 0.2), series):
        axes.bar(positions + offset, np.array(values[name]) * 100, width=0.4, color=colors[name],
                 label=f"share of {name} (above {token_label(summary.tail_threshold)}: {_pct(tails[name])})")
    axes.set_xticks(positions, [b.label for b in summary.buckets], rotation=30, ha="right")
    axes.set_xlabel("document length bucket (tokens)")
    axes.set_ylabel("share (%)")
    axes.set_title(f"Share of {series[0]} and of {series[1]} per length bucket")
    axes.legend()
    _save(figure, path)


def _plot_steps(path: Path, analysis: LengthAnalysis) -> None:
    from matplotlib.figure import Figure

    steps: StepSummary = analysis.steps
    config = analysis.config
    figure = Figure(figsize=(11, 4.5), layout="constrained")
    over_time, histogram = figure.subplots(1, 2)
    over_time.plot(np.arange(steps.steps), steps.maxima, ".", markersize=3, color="tab:blue")
    _log2_tokens(over_time, "y")
    over_time.set_xlabel("step")
    over_time.set_ylabel("longest sequence (tokens, log scale)")
    histogram.hist(steps.maxima, bins=np.geomspace(max(1, steps.maxima.min() * 0.95), steps.maxima.max() * 1.05 + 1, 40),
                   color="tab:blue", alpha=0.85)
    _log2_tokens(histogram, "x")
    histogram.set_xlabel("longest sequence of a step (tokens, log scale)")
    histogram.set_ylabel("steps")
    for axes, vertical in ((over_time, False), (histogram, True)):
        line = axes.axvline if vertical else axes.axhline
        line(config.max_seq_len, color="black", linestyle=":", label=f"S = {token_label(config.max_seq_len)}")
        line(analysis.lengths.tail_threshold, color="tab:red", linestyle="--",
             label=f"tail threshold {token_label(analysis.lengths.tail_threshold)}")
        axes.legend()
    figure.suptitle(f"Longest sequence per step: {steps.steps} steps, T = {token_label(config.token_budget)} tokens")
    _save(figure, path)


def _log2_tokens(axes, which: str) -> None:
    """Make ``axes``' ``which`` axis a base-2 logarithmic token axis labelled … 512, 1K, 2K, …"""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    (axes.set_xscale if which == "x" else axes.set_yscale)("log", base=2)
    axis = axes.xaxis if which == "x" else axes.yaxis
    axis.set_major_locator(LogLocator(base=2))
    axis.set_major_formatter(FuncFormatter(lambda value, _: token_label(int(round(value)))))
    axis.set_minor_formatter(NullFormatter())


def _figure():
    from matplotlib.figure import Figure

    figure = Figure(figsize=(9, 5), layout="constrained")
    return figure, figure.subplots()


def _save(figure, path: Path) -> None:
    with atomic_path(path) as temporary:
        figure.savefig(temporary, dpi=DPI)


def _pct(share: float) -> str:
    return f"{share * 100:.1f} %" if share >= 0.001 or share == 0 else f"{share * 100:.3f} %"


def _value(value: object) -> str:
    return f"`{value}`" if isinstance(value, str) else str(value)

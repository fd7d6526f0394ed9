"""Loss, learning rate and gradient norm per step of one training run, from its ``train_log.json``
(``hydraulis train --output-dir``), into ``paper_exp/results/``: ``stdlib_training.csv`` (step,
loss, lr, grad_norm, skipped) and ``stdlib_training.png`` (loss and gradient norm, learning rate
on a second axis). The committed run: 200 steps of the tiny model on the standard-library corpus
with the default recipe (``examples/configs/stdlib.toml``)::

    hydraulis data build-stdlib -o out/stdlib/corpus.jsonl
    hydraulis train --config examples/configs/stdlib.toml --output-dir out/stdlib/train
    .venv/bin/python paper_exp/training_curve.py out/stdlib/train/train_log.json
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from hydraulis.artifacts.train_log import read_train_log  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
NAME = "stdlib_training"
DPI = 90


def main(log: str) -> None:
    records = read_train_log(log)
    with open(RESULTS / f"{NAME}.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(("step", "loss", "lr", "grad_norm", "skipped"))
        writer.writerows((r.step, f"{r.loss:.6f}", f"{r.lr:.6e}", f"{r.grad_norm:.6f}", int(r.skipped))
                         for r in records)
    steps = [r.step + 1 for r in records]
    figure, axes = plt.subplots(figsize=(8, 4.5))
    axes.plot(steps, [r.loss for r in records], color="tab:blue", label="loss")
    axes.plot(steps, [r.grad_norm for r in records], color="tab:gray", alpha=0.5, linewidth=0.8,
              label="gradient norm (before clipping)")
    axes.set_xlabel("step")
    axes.set_ylabel("loss, gradient norm")
    rate = axes.twinx()
    rate.plot(steps, [r.lr for r in records], color="tab:orange", label="learning rate")
    rate.set_ylabel("learning rate")
    lines = axes.get_lines() + rate.get_lines()
    axes.legend(lines, [line.get_label() for line in lines], loc="upper right")
    axes.set_title(f"tiny on the standard library: {len(records)} steps, AdamW, cosine schedule, clip 1.0")
    figure.tight_layout()
    figure.savefig(RESULTS / f"{NAME}.png", dpi=DPI)
    print(f"wrote {RESULTS / NAME}.csv and .png; loss at step 20: {records[19].loss:.4f}, "
          f"at step {len(records)}: {records[-1].loss:.4f}")


if __name__ == "__main__":
    main(sys.argv[1])

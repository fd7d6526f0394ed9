"""Regenerate every paper_exp result: simulate all settings, then the tables and the figures.

    .venv/bin/python paper_exp/run_all.py [--steps 100]

About 15–30 minutes on 2 cores (the 1024-device settings take most of it); after each setting
it prints the overall progress and the time left. The code-like
workload is the committed ``paper_exp/data/stdlib_lengths.txt``; ``paper_exp/data/README.md``
says how to rebuild it from the standard library.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import figures  # noqa: E402
import run_settings  # noqa: E402
import tables  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=100, help="simulated steps per setting (default 100)")
    args = parser.parse_args()
    sys.argv = [sys.argv[0], "--steps", str(args.steps)]
    started = time.perf_counter()
    run_settings.main()
    tables.main()
    figures.main()
    print(f"paper_exp: {time.perf_counter() - started:.0f} s wall")


if __name__ == "__main__":
    main()

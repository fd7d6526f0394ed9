#!/usr/bin/env bash
# Planner simulation at scale: LLaMA-32B (analytic, H100 80 GB), 1024 devices, 1.6M tokens per
# step, 32K maximum, 100 steps of the committed web-like long-tail workload
# (examples/data/longtail.txt); Hydraulis against the homogeneous and static baselines on the
# same cost model. Prints the summary, the median planning latency and Hydraulis' mean
# predicted speed-up over each baseline.
#
# Usage: bash examples/test_planner.sh [OUT_DIR] [hydraulis simulate options]
#   e.g. bash examples/test_planner.sh out/tp --devices 256 --token-budget 400000 --corpus corpus.jsonl
# Options given later win; --lengths, --corpus or --synthetic-docs replace the default workload,
# --space the default model and device.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="$root/.venv/bin:$PATH"
out=$root/out/test_planner
if [[ $# -gt 0 && $1 != -* ]]; then out=$1; shift; fi
workload=(--lengths "$root/examples/data/longtail.txt")
space=(--model llama-32b --device h100-80g)
for arg in "$@"; do
    case $arg in
        --lengths|--lengths=*|--corpus|--corpus=*|--synthetic-docs|--synthetic-docs=*) workload=() ;;
        --space|--space=*) space=() ;;
    esac
done
started=$(date +%s)
hydraulis simulate --devices 1024 "${space[@]}" --token-budget 1600000 --max-seq-len 32768 --steps 100 \
    --seed 0 "${workload[@]}" -o "$out" "$@"
echo "test_planner: $(( $(date +%s) - started )) s wall; outputs in $out"

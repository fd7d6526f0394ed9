#!/usr/bin/env bash
# Measure every (cp, tp, pp) scheme that fits this machine and fit a scheme space.
# Usage: bash examples/profile_all_parallel_schemes.sh [MODEL] [OUT_DIR] [extra `hydraulis profile` flags...]
#   MODEL    model preset (default tiny); e.g. llama-7b --layers 4 on a GPU node
#   OUT_DIR  where the space and the measurement cache go (default out/profile/MODEL)
# Rerunning the same command resumes a killed sweep from OUT_DIR/cache. Defaults suit the tiny
# model on a small CPU (minutes on 2 cores; tiny also measures its full stages to report the
# representative block's extrapolation error); on GPUs pass longer --seq-lens, e.g.
#   bash examples/profile_all_parallel_schemes.sh llama-7b out/7b --layers 4 --seq-lens 1024:32768 --tp 1,2,4,8
# (later flags override the defaults below). Runs from a checkout whose .venv README's first command created.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="$root/.venv/bin:$PATH"
model=${1:-tiny}
out=${2:-$root/out/profile/$model}
shift $(( $# > 2 ? 2 : $# ))
mkdir -p "$out"
check=()
[ "$model" = tiny ] && check=(--check-full-stage)   # the tiny stage is small enough to also measure whole

hydraulis profile --model "$model" --cp 1,2 --tp 1,2,4 --pp 1,2 --seq-lens 32:512 --repeats 5 --warmup 1 \
    "${check[@]}" --cache "$out/cache" -o "$out/space.json" "$@"
hydraulis space show "$out/space.json"

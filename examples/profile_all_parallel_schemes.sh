#!/usr/bin/env bash
# Measure every (cp, tp, pp) scheme that fits this machine and fit a scheme space.
# Usage: bash examples/profile_all_parallel_schemes.sh [MODEL] [OUT_DIR] [more `hydraulis profile` flags...]
#   MODEL    model preset (default tiny)
#   OUT_DIR  where the space and the measurement cache go (default out/profile/MODEL)
# Defaults suit the tiny model on a small CPU (about 5 minutes on 2 cores): token counts 32-512,
# 5 repeats after 1 warm-up round, a representative block of 2 layers (the tiny model's stages
# have at most 4, so they are measured whole). Later flags override these, e.g. on a GPU node
#   bash examples/profile_all_parallel_schemes.sh llama-7b out/profile/7b --layers 8 --tp 1,2,4,8 \
#       --seq-lens 1024,2048,4096,8192,16384
# Rerunning the same command resumes a killed sweep from OUT_DIR/cache without measuring again
# what it finished. Runs from a checkout whose .venv README's first command created.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="$root/.venv/bin:$PATH"
model=${1:-tiny}
out=${2:-$root/out/profile/$model}
shift $(( $# > 2 ? 2 : $# ))
mkdir -p "$out"

hydraulis profile --model "$model" --cp 1,2 --tp 1,2,4 --pp 1,2 --seq-lens 32,64,128,192,256,384,512 \
    --repeats 5 --warmup 1 --block-layers 2 --cache "$out/cache" -o "$out/space.json" "$@"
hydraulis space show "$out/space.json"

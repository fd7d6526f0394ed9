#!/usr/bin/env bash
# Hydraulis end-to-end demo on the embedded defaults. Usage: bash examples/demo.sh [OUT_DIR]
# Runs from a checkout whose .venv README's first command created.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="$root/.venv/bin:$PATH"
out=${1:-$root/out/demo}
mkdir -p "$out"

echo "== 1. Import the original system's measured LLaMA-7B / 13B pools (A800, 8 GPUs per node)"
hydraulis space import bundled:7b -o "$out/space_7b.json" --devices 64
hydraulis space import bundled:13b -o "$out/space_13b.json" --devices 64
hydraulis space show "$out/space_7b.json" --optimizer-layout 8,4,1

echo
echo "== 2. Derive an analytic scheme space for LLaMA-32B on 1024 H100s (hardware we do not have)"
hydraulis space analytic --model llama-32b --device h100-80g --devices 1024 -o "$out/space_32b_h100.json"
hydraulis space show "$out/space_32b_h100.json" --optimizer-layout 128,8,1

echo
echo "== 3. Propose strategies for LLaMA-7B on 32 GPUs (8 per node), 128K tokens per step, 32K maximum,"
echo "     for the bundled long-tail lengths (examples/data/README.md says how they were made)"
hydraulis propose --space "$out/space_7b.json" --devices 32 --devices-per-node 8 --token-budget 131072 \
    --max-seq-len 32768 --lengths "$root/examples/data/longtail.txt" --strategies 8 --explain \
    -o "$out/proposal_7b.json"

echo
echo "== 4. Simulate 20 steps of that setting: Hydraulis against the baselines on the same cost model"
hydraulis simulate --space bundled:7b --devices 32 --token-budget 131072 --max-seq-len 32768 \
    --lengths "$root/examples/data/longtail.txt" --steps 20 --no-progress -o "$out/simulation_7b"

echo
echo "== 5. Train the tiny model on 4 CPU processes: the scheme space measured here by hydraulis profile"
echo "     (examples/spaces/tiny_cpu.json), a proposal, 3 steps"
echo "     under the proposal (dispatch plans each step, rank 0 broadcasts it), a checkpoint from the"
echo "     optimizer layout, then 3 more steps resumed from it with three strategies switching step by step"
hydraulis propose --space "$root/examples/spaces/tiny_cpu.json" --devices 4 --devices-per-node 4 --token-budget 512 \
    --max-seq-len 128 --lengths "$root/examples/data/longtail.txt" --strategies 4 -o "$out/proposal_tiny.json"
rm -rf "$out/checkpoints"
hydraulis train --model tiny --proposal "$out/proposal_tiny.json" --steps 3 --device cpu \
    --checkpoint-dir "$out/checkpoints" --output-dir "$out/train_proposal"
hydraulis train --model tiny --strategy 1,2,1+1,1,2 --strategy 1,1,2x2 --strategy 2,1,1+1,1,1x2 --steps 6 \
    --token-budget 512 --max-seq-len 128 --device cpu --space "$root/examples/spaces/tiny_cpu.json" \
    --resume "$out/checkpoints" --output-dir "$out/train_switching"

echo
echo "== 6. The paper's settings, simulated (python paper_exp/run_all.py regenerates them)"
cat "$root/paper_exp/results/summary.md"

echo
echo "demo artifacts in $out"

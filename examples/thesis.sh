#!/usr/bin/env bash
# The thesis measured end to end, in miniature: the tiny model on 4 CPU processes (gloo, fp32)
# under a device memory budget, so that the longest sequences of the corpus fit only on larger
# schemes, trained on the same batches by three contenders, interleaved, --repeats times:
#
#   hydraulis    the proposal (hydraulis propose) on the budgeted space, the strategy chosen per
#                step, balanced packing (dispatch_balanced_packing);
#   homogeneous  the best homogeneous strategy that holds every sequence (--homogeneous), with
#                balanced packing;
#   fixed        the same strategy with fixed packing (Megatron-LM style, micro-batches of
#                --max-seq-len tokens).
#
# Then the budget itself: the unconstrained CPU plan (1,1,1x4) under --device-memory fails on its
# first step with the error naming step, rank and bytes, and the proposal runs every step within it.
# Last: the table (examples/thesis_table.py) and the line
#   measured_speedup_vs_homogeneous=<x> measured_speedup_vs_fixed=<y> predicted_speedup_vs_homogeneous=<z>
#
# Usage: bash examples/thesis.sh [--out DIR] [--repeats 3] [--steps 8] [--space SPACE.json]
#            [--device-memory 16000000] [--homogeneous 2,2,1] [--stdlib-root DIR]
#            [--token-budget 2048] [--max-seq-len 1000] [--check-memory yes|no]
#
# --space: a scheme space of 4 CPU devices under the budget (default examples/spaces/tiny_cpu_16mb.json:
#   the measured tiny_cpu.json under 16,000,000 bytes per process, by `hydraulis space budget`;
#   there only (2,2,1) holds 1,024 tokens — see examples/spaces/README.md).
# --stdlib-root: the part of the standard library to train on (default lib2to3/fixes: 53 files,
#   33 k tokens, median 394 tokens, longest 2,666; cut to --max-seq-len).
# Each run's step lines go to OUT/runs/<repeat>/<contender>.log, its summary to .txt, its records to
# <contender>/train_log.json. Runs from a checkout whose .venv README's first command created; about
# 7 minutes on 2 cores under a load average of 6–9.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="$root/.venv/bin:$PATH"
stdlib=$(python -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')

out=$root/out/thesis repeats=3 steps=8 space=$root/examples/spaces/tiny_cpu_16mb.json budget=16000000
homogeneous=2,2,1 corpus_root=$stdlib/lib2to3/fixes token_budget=2048 max_seq_len=1000 check=yes
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2 ;; --repeats) repeats=$2 ;; --steps) steps=$2 ;; --space) space=$2 ;;
    --device-memory) budget=$2 ;; --homogeneous) homogeneous=$2 ;; --stdlib-root) corpus_root=$2 ;;
    --token-budget) token_budget=$2 ;; --max-seq-len) max_seq_len=$2 ;; --check-memory) check=$2 ;;
    *) echo "thesis.sh: unknown option $1 (see the usage at the top of the script)" >&2; exit 2 ;;
  esac
  shift 2
done
case $check in yes|no) ;; *) echo "thesis.sh: --check-memory takes yes or no, not $check" >&2; exit 2 ;; esac
rm -rf "$out/runs"
mkdir -p "$out/runs"
source "$root/examples/corpus.sh"

echo "== 1. corpus: the standard library under $corpus_root, cut to $max_seq_len tokens"
stdlib_corpus "$out" "$corpus_root" "$token_budget" "$max_seq_len"

echo
echo "== 2. scheme space under $budget bytes per process"
hydraulis space show "$space"

echo
echo "== 3. proposal"
hydraulis propose --space "$space" --devices 4 --devices-per-node 4 --token-budget "$token_budget" \
    --max-seq-len "$max_seq_len" --lengths "$out/report/lengths.txt" --strategies 4 --explain \
    -o "$out/proposal.json"
elapsed

common=(--model tiny --corpus "$out/corpus.jsonl" --cache-dir "$out/cache" --steps "$steps" --nproc 4
        --device cpu --token-budget "$token_budget" --max-seq-len "$max_seq_len")
contender() {  # contender NAME REPEAT: one training run, its summary line
  local name=$1 folder=$out/runs/$2/$1 args
  case $name in
    hydraulis) args=(--proposal "$out/proposal.json" --method dispatch_balanced_packing) ;;
    homogeneous) args=(--strategy "$homogeneous" --space "$space" --micro-batch-tokens "$max_seq_len"
                       --method dispatch_balanced_packing) ;;
    fixed) args=(--strategy "$homogeneous" --space "$space" --micro-batch-tokens "$max_seq_len"
                 --method fixed_packing) ;;
  esac
  if ! hydraulis train "${common[@]}" "${args[@]}" --output-dir "$folder" > "$folder.txt" 2> "$folder.log"; then
    tail -n 5 "$folder.log" >&2
    exit 1
  fi
  printf '   repeat %s %-12s %s\n' "$2" "$name" "$(grep '^summary:' "$folder.txt" | cut -d' ' -f2-)"
}

echo
echo "== 4. train: $repeats repeats of hydraulis, homogeneous $homogeneous, fixed packing, interleaved"
order=(hydraulis homogeneous fixed)
for repeat in $(seq 1 "$repeats"); do
  mkdir -p "$out/runs/$repeat"
  for name in "${order[@]}"; do contender "$name" "$repeat"; done
  order=("${order[@]:1}" "${order[0]}")
  elapsed
done

if [ "$check" = yes ]; then
  echo
  echo "== 5. the budget: --device-memory $budget"
  if hydraulis train "${common[@]}" --steps 1 --strategy 1,1,1x4 --space "$space" \
      --micro-batch-tokens "$max_seq_len" --device-memory "$budget" > "$out/unconstrained.txt" 2>&1; then
    echo "   1,1,1x4 fit the budget (unexpected: the budget does not constrain this corpus)"
  else
    echo "   1,1,1x4: $(grep -o 'device_memory: .*' "$out/unconstrained.txt" | head -1)"
  fi
  if hydraulis train "${common[@]}" --proposal "$out/proposal.json" --device-memory "$budget" \
      > "$out/budgeted.txt" 2>&1; then
    echo "   the proposal under the same budget: every one of its $steps steps within it"
  else
    echo "   the proposal under the same budget: $(grep -o 'device_memory: .*' "$out/budgeted.txt" | head -1)"
  fi
  elapsed
fi

echo
echo "== results (measured under whatever load this machine had; wall time $(( $(date +%s) - started )) s)"
python "$root/examples/thesis_table.py" "$out/runs"

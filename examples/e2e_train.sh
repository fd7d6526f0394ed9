#!/usr/bin/env bash
# End-to-end training on CPU: the tiny model on 4 processes (gloo, fp32), trained on the CPython
# standard library with a proposal and the Hydraulis batching method, then a homogeneous baseline
# on the same batches; each prints one line per step as it ends (strategy, tokens, loss, measured vs
# predicted ms) and a summary (tokens/s, mean prediction error), and the last lines compare them; both runs
# write TensorBoard events under DIR/tensorboard/.
#
# Usage: bash examples/e2e_train.sh [--out DIR] [--space SPACE.json] [--steps 8]
#            [--method dispatch_balanced_packing] [--baseline 1,1,1x4] [--baseline-method fixed_packing]
#            [--stdlib-root DIR] [--token-budget 2048] [--max-seq-len 512] [--nproc 4]
#            [--record-operations no|yes]
#
# --space: a scheme space for 4 CPU devices (default: examples/spaces/tiny_cpu.json, measured on a
#   2-core machine by `hydraulis profile` with the node filled by 4 processes, as training fills
#   it, and the reduction fitted to the runtime's own; median step error 7–10 % after each
#   strategy's first step on a quiet machine — see examples/spaces/README.md).
# --stdlib-root: the part of the standard library to train on (default: its idlelib package,
#   125 files, 1.2 MB — the whole library takes minutes to tokenize on two cores).
# --record-operations yes: both train logs record every stage's forwards and backwards with their
#   times (benchmarks/fidelity.py compares them with the cost model).
# Runs from a checkout whose .venv README's first command created.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="$root/.venv/bin:$PATH"
stdlib=$(python -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')

out=$root/out/e2e space=$root/examples/spaces/tiny_cpu.json steps=8 method=dispatch_balanced_packing baseline=1,1,1x4
baseline_method=fixed_packing corpus_root=$stdlib/idlelib token_budget=2048 max_seq_len=512 nproc=4 record=no
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2 ;; --space) space=$2 ;; --steps) steps=$2 ;; --method) method=$2 ;;
    --baseline) baseline=$2 ;; --baseline-method) baseline_method=$2 ;; --stdlib-root) corpus_root=$2 ;;
    --token-budget) token_budget=$2 ;; --max-seq-len) max_seq_len=$2 ;; --nproc) nproc=$2 ;;
    --record-operations) record=$2 ;;
    *) echo "e2e_train.sh: unknown option $1 (see the usage at the top of the script)" >&2; exit 2 ;;
  esac
  shift 2
done
mkdir -p "$out"
source "$root/examples/corpus.sh"

echo "== 1. corpus: the standard library under $corpus_root, tokenized with a 1024-entry byte-level BPE"
stdlib_corpus "$out" "$corpus_root" "$token_budget" "$max_seq_len"
elapsed

echo
echo "== 2. scheme space for $nproc CPU devices"
hydraulis space show "$space"

echo
echo "== 3. proposal for the corpus' lengths"
hydraulis propose --space "$space" --devices "$nproc" --devices-per-node "$nproc" --token-budget "$token_budget" \
    --max-seq-len "$max_seq_len" --lengths "$out/report/lengths.txt" --strategies 4 \
    -o "$out/proposal.json"
elapsed

common=(--model tiny --corpus "$out/corpus.jsonl" --cache-dir "$out/cache" --steps "$steps" --nproc "$nproc"
        --device cpu --token-budget "$token_budget" --max-seq-len "$max_seq_len")
case $record in
  yes) common+=(--record-operations) ;; no) ;;
  *) echo "e2e_train.sh: --record-operations takes yes or no, not $record" >&2; exit 2 ;;
esac

echo
echo "== 4. train: the proposal, batching method $method"
hydraulis train "${common[@]}" --proposal "$out/proposal.json" --method "$method" \
    --checkpoint-dir "$out/checkpoints" --output-dir "$out/hydraulis" --tensorboard "$out/tensorboard/hydraulis" \
    | tee "$out/hydraulis.txt"
elapsed

echo
echo "== 5. train: homogeneous baseline $baseline, batching method $baseline_method"
hydraulis train "${common[@]}" --strategy "$baseline" --space "$space" --micro-batch-tokens "$max_seq_len" \
    --method "$baseline_method" --output-dir "$out/baseline" --tensorboard "$out/tensorboard/baseline" \
    | tee "$out/baseline.txt"
elapsed

echo
echo "== comparison ($steps steps of at most $token_budget tokens, $nproc processes)"
printf '%-44s %s\n' "proposal, $method:" "$(grep '^summary:' "$out/hydraulis.txt" | cut -d' ' -f2-)"
printf '%-44s %s\n' "baseline $baseline, $baseline_method:" "$(grep '^summary:' "$out/baseline.txt" | cut -d' ' -f2-)"
echo "e2e wall time $(( $(date +%s) - started )) s; artifacts in $out; both runs side by side: tensorboard --logdir $out/tensorboard"

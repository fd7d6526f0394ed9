#!/usr/bin/env bash
# Rebuild paper_exp/data/stdlib_lengths.txt (the code-like workload) from this interpreter's
# standard library; see paper_exp/data/README.md. Usage: bash paper_exp/make_code_workload.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="$root/.venv/bin:$PATH"
cd "$root"
hydraulis data build-stdlib -o out/stdlib/corpus.jsonl
hydraulis analyze --corpus out/stdlib/corpus.jsonl --token-budget 200000 --max-seq-len 32768 -o out/stdlib/report
cp out/stdlib/report/lengths.txt paper_exp/data/stdlib_lengths.txt
echo "wrote paper_exp/data/stdlib_lengths.txt ($(wc -l < paper_exp/data/stdlib_lengths.txt) lengths)"

# Sourced by examples/e2e_train.sh and examples/thesis.sh: the wall clock since the start and the
# standard-library corpus step they share.
started=$(date +%s)
elapsed() { echo "   ($(( $(date +%s) - started )) s since the start)"; }

# stdlib_corpus OUT ROOT TOKEN_BUDGET MAX_SEQ_LEN: the .py files under ROOT as OUT/corpus.jsonl,
# tokenized with a 1024-entry byte-level BPE (cached in OUT/cache), lengths analysed in OUT/report.
stdlib_corpus() {
  hydraulis data build-stdlib --root "$2" -o "$1/corpus.jsonl"
  hydraulis analyze --corpus "$1/corpus.jsonl" --vocab-size 1024 --cache-dir "$1/cache" \
      --token-budget "$3" --max-seq-len "$4" -o "$1/report"
}

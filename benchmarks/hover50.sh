#!/usr/bin/env bash
# The common local comparison: every method on the same 50 HoVer dev claims (seed 0), at concurrency 16,
# plus MERMAID without memory (tool-call reduction) and the first 10 claims at concurrency 1.
# Usage: benchmarks/hover50.sh INDEX_DIR OUT_DIR [METHOD...]
# INDEX_DIR: e.g. the hover-mix index (wiki_corpus_hover_gold + the demo sample as distractors):
#   veracity index build ../shared/data/wiki_corpus_hover_gold/hover_dev_gold_paragraphs.jsonl demo \
#       --out ~/.veracity/indexes/hover-mix --dump-date 2017-10-01
# The demo sample's text is newer than HoVer (2020), so the runs pass --allow-leakage and their reports
# say so; the gold paragraphs themselves are from the 2017 dump.
set -euo pipefail
index=${1:?index dir}; out=${2:?output dir}; shift 2
methods=("$@")
[ ${#methods[@]} -gt 0 ] || methods=(direct rag mermaid emulate trification zofia)
common=(--dataset hover --limit 50 --seed 0 --index "$index" --allow-leakage)
for m in "${methods[@]}"; do
  veracity bench run "${common[@]}" --method "$m" --concurrency 16 --out "$out/hover50-$m-c16"
  if [ "$m" = mermaid ]; then
    veracity bench run "${common[@]}" --method mermaid --ablation no-memory --concurrency 16 \
      --out "$out/hover50-mermaid-no-memory-c16"
  fi
done
for m in "${methods[@]}"; do
  veracity bench run --dataset hover --limit 10 --seed 0 --index "$index" --allow-leakage --method "$m" \
    --concurrency 1 --out "$out/hover10-$m-c1"
done
veracity bench compare "$out"/hover50-*-c16 "$out"/hover10-*-c1 --markdown --out "$out/compare.md"

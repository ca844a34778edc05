#!/usr/bin/env bash
# The common local comparison: every method on the same 50 HoVer dev claims (seed 0), at concurrency 16
# and at concurrency 1, plus MERMAID without memory (the tool-call reduction of its evidence memory).
# Usage: benchmarks/hover50.sh INDEX_DIR OUT_DIR [METHOD...]
# INDEX_DIR: e.g. the hover-mix index (wiki_corpus_hover_gold + the demo sample as distractors):
#   veracity index build ../shared/data/wiki_corpus_hover_gold/hover_dev_gold_paragraphs.jsonl demo \
#       --out ~/.veracity/indexes/hover-mix --dump-date 2017-10-01
# The demo sample's text is newer than HoVer (2020), so the runs pass --allow-leakage and their reports
# say so; the gold paragraphs themselves are from the 2017 dump.
#
# vLLM's prefix cache keeps the prompts of one run for the next: a second run on the same claims finds
# most of its prompt already computed and looks faster than it is. Set RESTART_SERVER to the commands
# that restart your server and the script runs them before every run, so every run starts cold, e.g.
#   RESTART_SERVER='veracity serve --stop; veracity serve --detach --port 8011' benchmarks/hover50.sh ...
# LIMIT_C1 (default 50) sets how many claims run at concurrency 1 (MERMAID takes ~1 min per claim alone
# on two CPU cores; Trification several).
set -euo pipefail
index=${1:?index dir}; out=${2:?output dir}; shift 2
methods=("$@")
# default: every method of the registry (each has its benchmarks/configs/hover-50-<method>.toml)
[ ${#methods[@]} -gt 0 ] || read -ra methods <<< "$(python -c 'from veracity.pipeline.methods import METHODS; print(*METHODS)')"
limit_c1=${LIMIT_C1:-50}
common=(--dataset hover --seed 0 --index "$index" --allow-leakage)
cold() { if [ -n "${RESTART_SERVER:-}" ]; then bash -c "$RESTART_SERVER"; fi; }
for m in "${methods[@]}"; do
  cold
  veracity bench run "${common[@]}" --limit 50 --method "$m" --concurrency 16 --out "$out/hover50-$m-c16"
  if [ "$m" = mermaid ]; then
    cold
    veracity bench run "${common[@]}" --limit 50 --method mermaid --ablation no-memory --concurrency 16 \
      --out "$out/hover50-mermaid-no-memory-c16"
  fi
done
for m in "${methods[@]}"; do
  cold
  veracity bench run "${common[@]}" --limit "$limit_c1" --method "$m" --concurrency 1 \
    --out "$out/hover$limit_c1-$m-c1"
done
veracity bench compare "$out"/hover50-*-c16 "$out"/hover"$limit_c1"-*-c1 --markdown --out "$out/compare.md"

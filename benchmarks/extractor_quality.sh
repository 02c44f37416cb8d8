#!/usr/bin/env bash
# What a cheaper concept extractor costs in retrieval and answers: each data set with gold answers is
# indexed once per extractor, the lazy search answers every question on each index under the same
# settings, and each extractor's rows are paired with the default's question by question (gold-document
# recall of the context, answer F1 and EM, span F1, whether the answer holds the gold answer), with
# 95 % bootstrap intervals.
#
#   bash benchmarks/extractor_quality.sh                      # budget 20, both data sets
#   BUDGETS=0 EXTRACTORS="parser+entities pos_rules+entities" bash benchmarks/extractor_quality.sh   # budget 0
#
# An extractor is named as in `lazygraph bench extractors`: parser+entities (the default), parser,
# pos_rules+entities, pos_rules. Only the index differs between the rows of two extractors: the queries
# run on the embedded defaults. Rows are appended as they are scored into RESULTS (by default
# benchmarks/results/extractors/bBUDGETS-subqueries/) and a rerun resumes from them; each index's build seconds are kept
# in RESULTS/index-seconds.tsv. The extractors advance in turn, WINDOW questions at a time (10), so a
# run stopped early has rows of each to pair. Budget 20 costs twenty relevance tests, an expansion and
# an answer a question (one to two minutes on 2 cores). Budget 0 (the default preset) is cheap but
# tells the extractors apart on almost no local question: its fill ranks chunks by their similarity and
# BM25 to the query and subqueries (on 43 questions of both data sets, the recall was the same on every
# one and the answers on all but a few; BENCHMARKS.md, "Concept extractors side by side").
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
shared="$(cd "$repo/.." && pwd)/shared"
work="${WORK:-/tmp/lazygraph-extractors}"
budgets="${BUDGETS:-20}"
# One folder of rows per set of budgets (b20-subqueries: budget 20, the fill ranked by each subquery);
# rows of an older fill are kept apart in extractors/fill-question/.
results="${RESULTS:-$repo/benchmarks/results/extractors/b${budgets//,/-}-subqueries}"
datasets="${DATASETS:-hotpotqa100 musique50-dev}"
extractors="${EXTRACTORS:-parser+entities pos_rules}"   # the default and the cheapest
window="${WINDOW:-10}"
default_extractor="parser+entities"

command -v lazygraph >/dev/null || {
  echo "lazygraph is not on PATH; run: bash cluster/bootstrap.sh lazygraph --help first" >&2
  exit 2
}
mkdir -p "$results" "$work"
say() { printf '\n== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }

settings_of() {  # extractor name -> the two settings it stands for
  case "$1" in
    parser+entities) echo "parser true" ;;
    parser) echo "parser false" ;;
    pos_rules+entities) echo "pos_rules true" ;;
    pos_rules) echo "pos_rules false" ;;
    *) echo "unknown extractor '$1'; choose parser+entities, parser, pos_rules+entities or pos_rules" >&2; return 2 ;;
  esac
}

for extractor in $extractors; do settings_of "$extractor" >/dev/null; done
for name in $datasets; do
  [ -f "$shared/datasets/$name/questions.jsonl" ] || {
    echo "$name not found under $shared/datasets; set the shared folder beside the project" >&2
    exit 2
  }
done

for name in $datasets; do
  for extractor in $extractors; do
    read -r mode entities <<<"$(settings_of "$extractor")"
    index="$work/$name-$extractor"
    if [ ! -d "$index/manifest" ]; then
      say "indexing $name with $extractor into $index"
      started=$SECONDS
      LAZYGRAPH_CONCEPTS__NOUN_PHRASES=$mode LAZYGRAPH_CONCEPTS__USE_ENTITIES=$entities \
        lazygraph index --input "$shared/datasets/$name/corpus.jsonl" --index "$index"
      printf '%s\t%s\t%s\n' "$name" "$extractor" $((SECONDS - started)) >>"$results/index-seconds.tsv"
    fi
  done
done

# WINDOW questions at a time, every extractor in turn, so a run stopped early has paired rows.
longest=0
for name in $datasets; do
  n=$(wc -l <"$shared/datasets/$name/questions.jsonl")
  [ "$n" -gt "$longest" ] && longest=$n
done
for ((skip = 0; skip < longest; skip += window)); do
  for name in $datasets; do
    [ "$skip" -lt "$(wc -l <"$shared/datasets/$name/questions.jsonl")" ] || continue
    for extractor in $extractors; do
      say "$name, $extractor: questions $skip to $((skip + window - 1)), lazy search at budgets $budgets"
      # The queries read the extractor's index; every query setting is the default but where the LLM
      # cache lives: one per data set, shared by every extractor's index. A completion is keyed by its
      # whole prompt and a verdict by question and passage, so a question whose context comes out the
      # same on two indexes is answered once and the pairs cost only where the extractors differ.
      LAZYGRAPH_QUERY__LLM_CACHE__LOCATION="$work/$name-llm-cache" lazygraph eval answers --index "$work/$name-$extractor" \
        --questions "$shared/datasets/$name/questions.jsonl" --methods lazy --budgets "$budgets" \
        --limits 1000 --no-equal-cost --skip "$skip" --limit "$window" \
        --out "$results/$name-$extractor.jsonl"
    done
  done
done

for name in $datasets; do
  for extractor in $extractors; do
    [ "$extractor" = "$default_extractor" ] && continue
    say "$name: $extractor against $default_extractor, question by question"
    lazygraph eval paired "$results/$name-$extractor.jsonl" \
      --against "$results/$name-$default_extractor.jsonl" --out "$results/$name-$extractor-paired.json"
  done
done

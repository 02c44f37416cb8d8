#!/usr/bin/env bash
# Answers on the embedded defaults, both data sets with gold answers: hotpotqa100 and musique50-dev.
# Lazy search at the default preset's budget (0) against vector and hybrid RAG, at a 1k context and at
# lazy's cost (their context grown until their LLM tokens per answer equal lazy's), and lazy search
# alone at budget 20 (what twenty relevance tests buy over none), scored against the gold answers
# (HotpotQA EM and F1, span F1), then paired question by question.
#
#   bash benchmarks/answers_defaults.sh               # everything, resuming where it stopped
#   WINDOW=5 bash benchmarks/answers_defaults.sh      # smaller steps between the two data sets
#   LAZY_ONLY_BUDGETS=20,50 bash benchmarks/answers_defaults.sh   # more budgets of lazy search alone
#   LAZY_ONLY_BUDGETS= bash benchmarks/answers_defaults.sh       # no lazy search alone
#
# The two data sets advance in turn, WINDOW questions at a time, so a run stopped after an hour has
# rows of both. Every row is appended as soon as it is scored, into RESULTS (by default
# benchmarks/results/answers-defaults, kept with the project so a run can continue on another
# machine); a rerun skips the rows already there. About 6 to 8 minutes a question on 2 cores (budget
# 20 alone takes 3 to 4 of them).
#
# No LAZYGRAPH_* setting is exported: these are the settings a user gets. Rows measured under other
# settings belong in another RESULTS directory.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
shared="$(cd "$repo/.." && pwd)/shared"
results="${RESULTS:-$repo/benchmarks/results/answers-defaults}"
work="${WORK:-/tmp/lazygraph-answers}"
window="${WINDOW:-10}"
budgets="${BUDGETS:-0}"                           # lazy against the baselines
lazy_only_budgets="${LAZY_ONLY_BUDGETS-20}"        # lazy alone; set but empty: none
datasets="${DATASETS:-hotpotqa100 musique50-dev}"

command -v lazygraph >/dev/null || {
  echo "lazygraph is not on PATH; run: bash cluster/bootstrap.sh lazygraph --help first" >&2
  exit 2
}
mkdir -p "$results" "$work"
say() { printf '\n== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }

total() { wc -l < "$shared/datasets/$1/questions.jsonl"; }

for name in $datasets; do
  if [ ! -f "$shared/datasets/$name/questions.jsonl" ]; then
    echo "$name not found under $shared/datasets; set the shared folder beside the project" >&2
    exit 2
  fi
  if [ ! -d "$work/$name/manifest" ]; then
    say "indexing $name into $work/$name"
    lazygraph index --input "$shared/datasets/$name/corpus.jsonl" --index "$work/$name"
  fi
done

longest=0
for name in $datasets; do n=$(total "$name"); [ "$n" -gt "$longest" ] && longest=$n; done

for ((skip = 0; skip < longest; skip += window)); do
  for name in $datasets; do
    [ "$skip" -lt "$(total "$name")" ] || continue
    say "$name: questions $skip to $((skip + window - 1))"
    lazygraph eval answers --index "$work/$name" \
      --questions "$shared/datasets/$name/questions.jsonl" \
      --methods lazy,vector,hybrid --budgets "$budgets" --limits 1000 \
      --skip "$skip" --limit "$window" --out "$results/$name.jsonl"
    if [ -n "$lazy_only_budgets" ]; then
      lazygraph eval answers --index "$work/$name" \
        --questions "$shared/datasets/$name/questions.jsonl" \
        --methods lazy --budgets "$lazy_only_budgets" --limits 1000 --no-equal-cost \
        --skip "$skip" --limit "$window" --out "$results/$name.jsonl"
    fi
  done
done

for name in $datasets; do
  say "$name: lazy against each other method, question by question"
  lazygraph eval paired "$results/$name.jsonl" --out "$results/$name-paired.json"
done

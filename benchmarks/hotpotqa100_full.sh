#!/usr/bin/env bash
# The whole hotpotqa100 comparison of BENCHMARKS.md in one resumable command: lazy search at budgets
# 20, 50 and 100 against vector and hybrid RAG at 1k/2k/8k context tokens (gold-document recall), then
# the answers of all three (lazy at budgets 0 and 20, the baselines at 1k tokens and at lazy's cost)
# against the gold answers (HotpotQA EM and F1, span F1).
#
#   bash benchmarks/hotpotqa100_full.sh                 # everything, resuming where it stopped
#   BUDGETS=50 STEPS=grid bash benchmarks/hotpotqa100_full.sh
#
# Every step appends one JSON line per question as it is measured, into RESULTS (by default
# benchmarks/results/hotpotqa100, kept with the project so a run can continue on another machine), and
# skips what is already there: stopping it loses at most the question in flight. On 2 cores the grid
# takes about 1.5, 2 and 3 hours at budgets 20, 50 and 100, and the answers about five minutes a
# question (lazy at two budgets, each baseline at 1k and at two matched costs).
#
# Everything runs on the embedded defaults (the settings a user gets). Set LAZYGRAPH_* variables
# before calling to measure something else, and use a new RESULTS directory when you do: rows measured
# under other settings must not be mixed.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
shared="$(cd "$repo/.." && pwd)/shared"
corpus="${CORPUS:-$shared/datasets/hotpotqa100/corpus.jsonl}"
questions="${QUESTIONS:-$shared/datasets/hotpotqa100/questions.jsonl}"
index="${INDEX:-/tmp/hp/index}"
results="${RESULTS:-$repo/benchmarks/results/hotpotqa100}"
budgets="${BUDGETS:-20,50,100}"
steps="${STEPS:-index,baselines,grid,answers,compare}"

step() { [[ ",$steps," == *",$1,"* ]]; }
say() { printf '\n== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }

if [ ! -f "$corpus" ] || [ ! -f "$questions" ]; then
  echo "hotpotqa100 not found at $corpus / $questions; set CORPUS and QUESTIONS" >&2
  exit 2
fi
command -v lazygraph >/dev/null || {
  echo "lazygraph is not on PATH; run: bash cluster/bootstrap.sh lazygraph --help, then" >&2
  echo "export PATH=\$HOME/.cache/lazygraph/venv/bin:\$PATH" >&2
  exit 2
}
mkdir -p "$results"

if step index && [ ! -d "$index/manifest" ]; then
  say "indexing $corpus into $index"
  lazygraph index --input "$corpus" --index "$index"
fi
if step baselines; then
  say "vector, hybrid and the no-LLM focused ablations"
  lazygraph bench baselines --index "$index" --questions "$questions" \
    --contexts 1000,2000,8000 --rows "$results/baseline-rows.jsonl"
fi
if step grid; then
  say "lazy search at budgets $budgets"
  lazygraph bench query --index "$index" --questions "$questions" \
    --budgets "$budgets" --contexts 1000,2000,8000 --rows "$results/grid-rows.jsonl" \
    --out "$results/grid-report.json"
fi
if step answers; then
  say "answers against the gold answers: budgets 0 and 20, 1k tokens, and at equal cost"
  lazygraph eval answers --index "$index" --questions "$questions" --methods lazy,vector,hybrid \
    --budgets 0,20 --limits 1000 --out "$results/answers-b0-b20.jsonl"
fi
if step compare; then
  say "lazy search against each other method, question by question"
  lazygraph eval paired "$results/grid-rows.jsonl" --baselines "$results/baseline-rows.jsonl" \
    --out "$results/compare.json"
  if [ -s "$results/answers-b0-b20.jsonl" ]; then
    lazygraph eval paired "$results/answers-b0-b20.jsonl" --out "$results/compare-answers-b0-b20.json"
  fi
fi

#!/usr/bin/env bash
# The whole hotpotqa100 comparison of BENCHMARKS.md in one resumable command: lazy search at budgets
# 20, 50 and 100 against vector and hybrid RAG at 1k/2k/8k context tokens (gold-document recall), then
# the answers of all three at budget 50 and 1k tokens against the gold answers (HotpotQA EM and F1).
#
#   bash benchmarks/hotpotqa100_full.sh                 # everything, resuming where it stopped
#   BUDGETS=50 STEPS=grid bash benchmarks/hotpotqa100_full.sh
#
# Every step appends one JSON line per question as it is measured, into RESULTS (by default
# benchmarks/results/hotpotqa100, kept with the project so a run can continue on another machine), and
# skips what is already there: stopping it loses at most the question in flight. On 2 cores the grid
# takes about 1.5, 2 and 3 hours at budgets 20, 50 and 100, and the answers about an hour.
#
# The relevance assessor reads 32 focus tokens with the combined rule refitted for that length (the
# relevance profile focus32, lazygraph/settings/relevance.py), and claims are extracted once per query; everything
# else is the embedded defaults. Set LAZYGRAPH_* variables before calling to change that, and use a
# new RESULTS directory when you do: rows measured under other settings must not be mixed.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
shared="$(cd "$repo/.." && pwd)/shared"
corpus="${CORPUS:-$shared/datasets/hotpotqa100/corpus.jsonl}"
questions="${QUESTIONS:-$shared/datasets/hotpotqa100/questions.jsonl}"
index="${INDEX:-/tmp/hp/index}"
results="${RESULTS:-$repo/benchmarks/results/hotpotqa100}"
budgets="${BUDGETS:-20,50,100}"
steps="${STEPS:-index,baselines,grid,answers,compare}"

export LAZYGRAPH_QUERY__RELEVANCE_FOCUS_TOKENS="${LAZYGRAPH_QUERY__RELEVANCE_FOCUS_TOKENS:-32}"
export LAZYGRAPH_QUERY__RELEVANCE__PROFILE="${LAZYGRAPH_QUERY__RELEVANCE__PROFILE:-focus32}"
export LAZYGRAPH_QUERY__MAP_SCOPE="${LAZYGRAPH_QUERY__MAP_SCOPE:-query}"

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
  say "answers against the gold answers: budget 50, 1k tokens"
  lazygraph eval answers --index "$index" --questions "$questions" --methods lazy,vector,hybrid \
    --budgets 50 --limits 1000 --out "$results/answers.jsonl"
fi
if step compare; then
  say "lazy search against each other method, question by question"
  lazygraph eval paired "$results/grid-rows.jsonl" --baselines "$results/baseline-rows.jsonl" \
    --out "$results/compare.json"
  if [ -s "$results/answers.jsonl" ]; then
    lazygraph eval paired "$results/answers.jsonl" --out "$results/compare-answers.json"
  fi
fi

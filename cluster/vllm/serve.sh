#!/usr/bin/env bash
# Serve the relevance/synthesis model behind an OpenAI-compatible endpoint with vLLM.
#
#   cluster/vllm/serve.sh                          # Qwen2.5-Coder-1.5B-Instruct on port 8000
#   MODEL=Qwen/Qwen2.5-7B-Instruct PORT=8001 cluster/vllm/serve.sh --tensor-parallel-size 2
#
# Then point lazygraph at it: LAZYGRAPH_CONFIG=cluster/vllm/lazygraph-vllm.yaml (base_url, json_dialect).
# Needs a GPU host with vllm installed (`pip install 'lazygraph[gpu]'` or `pip install vllm`).
set -euo pipefail

model=${MODEL:-Qwen/Qwen2.5-Coder-1.5B-Instruct}
host=${HOST:-0.0.0.0}
port=${PORT:-8000}
# Relevance tests read the first token's top log-probabilities; the server must allow that many.
max_logprobs=${MAX_LOGPROBS:-20}

command -v vllm >/dev/null || { echo "serve.sh: vllm is not installed; pip install vllm (GPU host)" >&2; exit 1; }

args=(
  "$model"
  --host "$host" --port "$port"
  --served-model-name "$model"
  --max-model-len "${MAX_MODEL_LEN:-4096}"
  --gpu-memory-utilization "${GPU_MEMORY_UTILIZATION:-0.85}"
  # Many relevance tests share one question: the shared prompt prefix is computed once.
  --enable-prefix-caching
  --max-logprobs "$max_logprobs"
  --max-num-seqs "${MAX_NUM_SEQS:-256}"
  --seed 0
)
[ -n "${VLLM_API_KEY:-}" ] && args+=(--api-key "$VLLM_API_KEY")

exec vllm serve "${args[@]}" "$@"

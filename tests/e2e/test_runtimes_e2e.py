"""The real runtimes: Spark with Delta Lake, the embedded LLM, the embedding model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.e2e


def test_spark_writes_merges_and_reads_delta(spark, tmp_path: Path) -> None:
    from delta.tables import DeltaTable

    path = str(tmp_path / "t")
    spark.createDataFrame([(1, "a"), (2, "b")], "id int, v string").write.format("delta").save(path)
    updates = spark.createDataFrame([(2, "B"), (3, "c")], "id int, v string")
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(updates.alias("u"), "t.id = u.id")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
    )
    rows = sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())
    assert rows == [(1, "a"), (2, "B"), (3, "c")]
    history = DeltaTable.forPath(spark, path).history().select("operation").collect()
    assert [h.operation for h in history] == ["MERGE", "WRITE"]


def test_sync_merges_only_the_difference_and_rewrites_only_the_files_it_touches(
    spark, settings, tmp_path: Path
) -> None:
    """``IndexStore.sync`` (the community tables after a local update): one row changed, one gone and
    one new leave the table equal to the new rows, and the MERGE rewrites the files holding those rows
    only, not every file of the table."""
    from deltalake import DeltaTable
    from pyspark.sql import functions as F

    from lazygraph import tables
    from lazygraph.tables.store import IndexStore

    store = IndexStore(spark, str(tmp_path), "run", settings)
    store.note = lambda name: None  # no concurrent-writer check: the table is written directly here
    name = tables.CONCEPT_COMMUNITIES
    ids = F.concat(F.lit("c"), F.col("id").cast("string"))
    rows = spark.range(0, 4000).select(
        ids.alias("concept_id"),
        F.lit(0).cast("int").alias("level"),
        F.concat(F.lit("k"), (F.col("id") % 50).cast("string")).alias("community_id"),
    )
    store.overwrite(name, rows.repartition(8))
    files = len(DeltaTable(str(tmp_path / name)).file_uris())
    moved = F.when(F.col("concept_id") == "c17", F.lit("moved")).otherwise(F.col("community_id"))
    new = rows.withColumn("community_id", moved).filter(F.col("concept_id") != "c99")
    new = new.unionByName(
        spark.createDataFrame([("c-new", 0, "k1")], "concept_id string, level int, community_id string")
    )
    store.sync(name, new)

    got = {tuple(r) for r in spark.read.format("delta").load(str(tmp_path / name)).collect()}
    assert got == {tuple(r) for r in new.collect()}
    last = DeltaTable(str(tmp_path / name)).history(1)[0]
    assert last["operation"] == "MERGE"
    metrics = last["operationMetrics"]
    assert int(metrics["numTargetRowsUpdated"]) == 1 and int(metrics["numTargetRowsDeleted"]) == 1
    assert int(metrics["numTargetFilesRemoved"]) <= 2 < files

    # The same rows again: Delta commits nothing, and the run records no version of its own for the
    # table (its manifest keeps the last published one; noting would blame another writer).
    version = DeltaTable(str(tmp_path / name)).version()
    del store.note
    store.written.clear()
    store.sync(name, new)
    assert DeltaTable(str(tmp_path / name)).version() == version
    assert name not in store.written


def test_embedded_llm_generates_and_follows_a_schema(embedded_llm) -> None:
    result = embedded_llm.chat(
        [{"role": "user", "content": "Name the capital of France in one word."}], max_tokens=8
    )
    assert "paris" in result.text.lower()
    assert result.prompt_tokens > 0 and result.completion_tokens > 0
    schema = {
        "type": "object",
        "properties": {"colours": {"type": "array", "items": {"type": "string"}}},
        "required": ["colours"],
    }
    structured = embedded_llm.chat(
        [{"role": "user", "content": "List two colours of the French flag as JSON."}],
        max_tokens=40,
        json_schema=schema,
    )
    parsed = json.loads(structured.text)
    assert isinstance(parsed["colours"], list) and parsed["colours"]


def test_the_answer_schema_bounds_a_sentence_on_the_real_grammar(embedded_llm) -> None:
    from lazygraph.query.answer import answer_schema, parse_sentences

    schema = answer_schema(n_facts=2, max_facts=2, max_sentences=2, max_chars=60)
    reply = embedded_llm.chat(
        [
            {
                "role": "user",
                "content": "Facts: [F1] The tide rises twice a day. [F2] The moon pulls the ocean.\n"
                "Write one very long sentence, at least forty words, that explains the tides in detail, "
                'as JSON {"sentences": [{"text": ..., "facts": [...]}]}.',
            }
        ],
        max_tokens=160,
        json_schema=schema,
    )
    parsed = json.loads(reply.text)  # closed within max_tokens although asked for a long sentence
    assert parsed["sentences"] and all(len(s["text"]) <= 60 for s in parsed["sentences"])
    assert all(s.text for s in parse_sentences(reply.text, n_facts=2, max_facts=2))


def test_relevance_from_logprobs_ranks_relevant_above_irrelevant(embedded_llm) -> None:
    question = "When did the Eiffel Tower open to the public?"
    relevant = "The Eiffel Tower was opened to the public on 31 March 1889, for the World's Fair."
    irrelevant = "Sourdough bread needs a starter culture of wild yeast and lactobacilli."
    with embedded_llm.ledger() as ledger:
        p_rel, p_irr = embedded_llm.relevance(question, [relevant, irrelevant])
    assert p_rel > 0.5 > p_irr
    assert ledger.summary()["relevance"]["calls"] == 2


def test_embedder_normalises_and_separates(embedder) -> None:
    vectors = embedder.encode(
        [
            "The tide rose over the harbour wall.",
            "Seawater flooded the quay.",
            "The parliament passed a budget law.",
        ]
    )
    assert vectors.dtype == np.float32 and vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    sims = vectors @ vectors.T
    assert sims[0, 1] > sims[0, 2]
    assert embedder.encode_for_storage(["x"]).dtype == np.float16

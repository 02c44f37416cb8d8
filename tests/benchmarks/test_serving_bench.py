"""The synthetic index generator writes an index the serving store accepts, shaped as its module doc
says, and the serving benchmark measures it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

from lazygraph import tables
from lazygraph.bench import serving as bench_serving
from lazygraph.bench import synthetic_index as gen
from lazygraph.serving import ServingStore, layout

ROOT = Path(__file__).resolve().parents[2]

CHUNKS = 2_000


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("synthetic") / "index"
    return out, gen.generate(out, CHUNKS, seed=3)


def printed(arguments: list[str]) -> dict[str, Any]:
    """The JSON object a benchmark run in a child Python process prints last."""
    done = subprocess.run(
        [sys.executable, *arguments],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def read(out: Path, name: str) -> Any:
    return DeltaTable(str(out / name)).to_pyarrow_table()


def test_the_serving_store_opens_on_the_generated_index(generated) -> None:
    out, report = generated
    store = ServingStore.open(str(out))
    assert store.n_chunks == CHUNKS
    assert store.meta["dimension"] == gen.DIM and store.meta["concept_vectors"]
    assert len(store.nearest_chunks(np.ones(gen.DIM, np.float32), 10)) == 10
    assert report["store"] == store.uri


def test_every_index_table_is_written_with_its_schema(generated) -> None:
    out, report = generated
    for name in tables.ALL_TABLES:
        table = DeltaTable(str(out / name))
        assert set(table.schema().to_arrow().names) == set(tables.schemas.SPECS[name].schema.names), name
    assert report["rows"][tables.CHUNKS] == CHUNKS
    assert read(out, tables.CHUNK_EMBEDDINGS).num_rows == CHUNKS


def test_mentions_and_terms_per_chunk_are_near_the_targets(generated) -> None:
    out, _ = generated
    mentions = read(out, tables.MENTIONS)
    terms = read(out, tables.CHUNK_TERMS)
    assert mentions.num_rows / CHUNKS == pytest.approx(gen.MENTIONS_PER_CHUNK, rel=0.25)
    assert terms.num_rows / CHUNKS == pytest.approx(gen.TERMS_PER_CHUNK, rel=0.15)
    assert pc.count_distinct(mentions.column("chunk_id")).as_py() == CHUNKS
    assert pc.count_distinct(terms.column("chunk_id")).as_py() == CHUNKS


def test_concept_frequencies_fall_off_like_a_zipf_law(generated) -> None:
    _, report = generated
    assert 0.4 < report["stats"]["concept_zipf_exponent"] < 1.2
    assert 0 < report["stats"]["kept_concepts"] < report["stats"]["concepts"]


def test_three_community_levels_with_every_chunk_in_a_level_0_community(generated) -> None:
    out, _ = generated
    communities = read(out, tables.COMMUNITIES)
    levels = communities.column("level").to_numpy()
    assert sorted(set(levels.tolist())) == [0, 1, 2]
    assert np.bincount(levels).tolist() == gen.Shape(CHUNKS).per_level
    by_id = dict(zip(communities.column("community_id").to_pylist(), levels.tolist(), strict=True))
    for parent, level in zip(communities.column("parent_id").to_pylist(), levels.tolist(), strict=True):
        assert (parent is None) == (level == 0)
        assert parent is None or by_id[parent] == level - 1
    links = read(out, tables.CHUNK_COMMUNITIES)
    level_0 = links.filter(pc.equal(links.column("level"), 0))
    assert pc.count_distinct(level_0.column("chunk_id")).as_py() == CHUNKS
    store = ServingStore.open(str(out))
    assert store.meta["datasets"][layout.COMMUNITIES] == communities.num_rows  # no chunk left unassigned


def test_chunk_vectors_cluster_around_their_communities(generated) -> None:
    """Chunks of one level-2 community are closer to each other than to other chunks."""
    out, _ = generated
    store = ServingStore.open(str(out))
    vectors = bench_serving.query_vectors(store, 100, seed=1)
    hits = store.nearest_chunks(vectors[0], 50)
    assert hits[0].score > 0.8 and hits[-1].score > 0.3
    random_pair = float(vectors[1] @ vectors[2])
    assert random_pair < hits[-1].score


def test_the_benchmark_prints_every_figure_with_sane_values(generated) -> None:
    out, _ = generated
    figures = printed(
        [
            str(ROOT / "benchmarks" / "bench_serving.py"),
            "--index",
            str(out),
            "--subqueries",
            "30",
            "--working-sets",
            "3",
        ]
    )
    for key in (
        "uss_gb",
        "driver_rss_gb",
        "open_s",
        "p50_ms",
        "p95_ms",
        "recall_at_50",
        "chunks",
        "store_bytes",
    ):
        assert key in figures, key
    assert figures["chunks"] == CHUNKS
    assert 0 <= figures["recall_at_50"] <= 1 and figures["recall_at_50"] > 0.9  # exact scans below 100k rows
    assert figures["p95_ms"] >= figures["p50_ms"] > 0
    # no term of this small index has more postings than the default depth: BM25 is read exactly
    assert figures["postings_depth"] > CHUNKS and figures["bm25_overlap_at_50"] == 1.0
    steps = figures["step_p95_ms"]
    assert set(steps) == {"nearest_chunks", "chunks", "communities_of", "chunks_of", "communities", "bm25"}
    assert all(ms > 0 for ms in steps.values())
    assert 0 < figures["uss_gb"] < 4 and 0 < figures["driver_rss_gb"] < 2
    assert figures["open_s"] > 0 and figures["store_bytes"] > 0
    # three lazy queries' working sets: their candidates, with the communities above them
    assert figures["working_sets"] == 3 and figures["working_set_p95_ms"] >= figures["working_set_p50_ms"] > 0
    assert 50 < figures["working_set_chunks"] <= CHUNKS and figures["working_set_communities"] > 3
    assert figures["topics_p95_ms"] >= figures["topics_p50_ms"] > 0  # the map step's groups were read


def test_the_generator_never_replaces_a_directory_it_did_not_write(tmp_path: Path) -> None:
    from lazygraph.errors import ConfigError

    real = tmp_path / "index"
    real.mkdir()
    (real / "manifest").mkdir()  # as a real index would have
    with pytest.raises(ConfigError, match="holds no synthetic index"):
        gen.generate(real, 50, store=False)
    assert (real / "manifest").is_dir()
    again = tmp_path / "synthetic"
    gen.generate(again, 50, store=False)
    gen.generate(again, 50, store=False)  # its own output is replaced
    assert (again / gen.SYNTHETIC_MARK).exists()


def test_the_benchmark_measures_query_actors_alive_together(generated) -> None:
    """``--actors 2``: one actor process alone, then two alive at once, each measured by its USS;
    ``--queries-at-once 3``: one process answering three streams of subqueries in threads."""
    out, _ = generated
    figures = printed(
        [
            "-m",
            "lazygraph",
            "bench",
            "serving",
            "--index",
            str(out),
            "--subqueries",
            "5",
            "--recall-queries",
            "2",
            "--actors",
            "2",
            "--queries-at-once",
            "3",
        ],  # fmt: skip
    )
    assert figures["actors"] == 2 and len(figures["actors_uss_gb"]) == 2
    # one process answering three streams at once, against one answering one
    assert figures["queries_at_once"] == 3 and figures["one_at_a_time_uss_gb"] > 0
    ratio = figures["at_once_uss_gb"] / figures["one_at_a_time_uss_gb"]
    assert figures["at_once_over_one"] == pytest.approx(ratio, abs=0.02)
    assert all(0 < uss < 4 for uss in figures["actors_uss_gb"]) and figures["one_actor_uss_gb"] > 0
    summed = sum(figures["actors_uss_gb"]) / figures["one_actor_uss_gb"]
    assert figures["actors_over_one"] == pytest.approx(summed, abs=0.02)


def test_the_store_of_a_synthetic_index_is_rebuilt_alone(generated, tmp_path: Path) -> None:
    """``--store-only``: the store is rewritten from the kept tables with the same concept vectors (the
    generator's, not the embedding model's); a directory without a synthetic index is refused."""
    from lazygraph.errors import ConfigError

    out, _ = generated
    before = ServingStore.open(str(out))
    probe = before._dataset(layout.CONCEPTS).take([0, 1], columns=["vector"])  # noqa: SLF001
    vector = np.asarray(probe.column("vector")[1].as_py(), np.float32)
    nearest = before.nearest_concepts(vector, 5)
    rebuilt = gen.rebuild_store(out, CHUNKS, seed=3)
    after = ServingStore.open(str(out))
    assert rebuilt["format"] == layout.FORMAT and after.meta["created_at"] != before.meta["created_at"]
    assert [hit.id for hit in after.nearest_concepts(vector, 5)] == [hit.id for hit in nearest]
    with pytest.raises(ConfigError, match="no synthetic index"):
        gen.rebuild_store(tmp_path, CHUNKS, seed=3)

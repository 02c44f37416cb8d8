"""The graph-scale benchmark's inputs: synthetic mentions as the synthetic index draws them."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from lazygraph.bench import graph_scale
from lazygraph.errors import ConfigError
from lazygraph.settings import load_settings


def test_the_mentions_of_n_chunks_are_written_as_parquet(tmp_path: Path) -> None:
    written = graph_scale.write_mentions(tmp_path, 3_000, seed=1)
    mentions = pq.read_table(tmp_path / "mentions")
    docs = pq.read_table(tmp_path / "chunk_docs")
    names = pq.read_table(tmp_path / "names.parquet")
    assert written["mentions"] == mentions.num_rows and docs.num_rows == 3_000
    assert 15 <= mentions.num_rows / 3_000 <= 25  # about 20 distinct concepts a chunk
    assert set(mentions.column("chunk_id").to_pylist()) <= set(docs.column("chunk_id").to_pylist())
    assert set(mentions.column("concept_id").to_pylist()) == set(names.column("concept_id").to_pylist())
    # documents of 1 to 4 chunks
    per_doc = docs.group_by("doc_id").aggregate([("chunk_id", "count")]).column("chunk_id_count").to_pylist()
    assert min(per_doc) >= 1 and max(per_doc) <= 4


def test_a_directory_it_did_not_write_is_refused(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("a user's file")
    with pytest.raises(ConfigError, match="not written by this benchmark"):
        graph_scale.main(["--chunks", "10", "--work", str(tmp_path)], load_settings())
    assert (tmp_path / "keep.txt").exists()


def test_peak_memory_sees_this_process(tmp_path: Path) -> None:
    with graph_scale.PeakMemory(interval=0.01) as memory:
        block = bytearray(64 * 1024 * 1024)
        block[::4096] = b"x" * len(block[::4096])
    assert memory.gb()["python_driver_gb"] >= 0.06


def test_each_stage_says_when_it_ends_with_its_seconds_and_memory(capsys: pytest.CaptureFixture[str]) -> None:
    seconds: dict[str, float] = {}
    with graph_scale.PeakMemory(interval=10) as memory, graph_scale._timed(seconds, "graph", memory):
        pass  # the sampler's first round is taken on entry, before any wait
    line = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert line["stage"] == "graph" and line["seconds"] == seconds["graph"]
    assert line["memory"]["python_driver_gb"] >= 0.03  # this test process, pytest and pyarrow loaded


def test_a_finished_stage_is_recorded_and_only_stages_without_a_gap_count(tmp_path: Path) -> None:
    seconds: dict[str, float] = {}
    with graph_scale._timed(seconds, "counts", work=tmp_path):
        pass
    assert list(graph_scale.finished_stages(tmp_path)) == ["counts"]
    # A communities record without the graph's is not a run to go on from.
    (tmp_path / "stages" / "communities.json").write_text('{"stage": "communities", "seconds": 1.0}\n')
    assert list(graph_scale.finished_stages(tmp_path)) == ["counts"]
    with graph_scale._timed(seconds, "graph", work=tmp_path):
        pass
    assert list(graph_scale.finished_stages(tmp_path)) == ["counts", "graph", "communities"]


def test_resume_refuses_other_chunks_or_a_run_that_wrote_no_mentions(tmp_path: Path) -> None:
    settings = load_settings()
    work = tmp_path / "gs"
    work.mkdir()
    (work / graph_scale.SYNTHETIC_MARK).write_text("written by lazygraph bench graph-scale\n")
    with pytest.raises(ConfigError, match="no finished graph-scale mentions"):
        graph_scale.main(["--chunks", "10", "--work", str(work), "--resume"], settings)
    (work / "generated.json").write_text(json.dumps({"chunks": 20, "seed": 0, "mentions": 400}))
    with pytest.raises(ConfigError, match="holds 20 chunks of seed 0"):
        graph_scale.main(["--chunks", "10", "--work", str(work), "--resume"], settings)
    with pytest.raises(ConfigError, match="holds 20 chunks of seed 0"):
        graph_scale.main(["--chunks", "20", "--seed", "3", "--work", str(work), "--resume"], settings)
    assert (work / "generated.json").exists()  # nothing of the earlier run was removed


@pytest.mark.e2e
def test_the_stages_run_on_spark_and_a_resumed_run_keeps_the_finished_ones(
    spark, settings, tmp_path: Path
) -> None:
    graph_scale.write_mentions(tmp_path, 1_500, seed=2)
    first = graph_scale.run_stages(spark, settings, tmp_path, 1_500)
    assert set(first["seconds"]) == {"counts", "graph", "communities"}
    assert first["kept_concepts"] > 0 and 0 < first["kept_edges"] <= first["pairs"]
    task = graph_scale.largest_task(settings, first["task_units"], first["kept_edge_frame"])
    assert 0 < task["largest_task_edges"] <= first["kept_edges"]
    assert task["largest_task_edge_share"] == round(task["largest_task_edges"] / first["kept_edges"], 4)

    # A run stopped after the graph stage: only the communities run again.
    (tmp_path / "stages" / "communities.json").unlink()
    concepts_log = tmp_path / "tables" / "concepts" / "_delta_log"
    versions = sorted(concepts_log.glob("*.json"))
    resumed = graph_scale.run_stages(spark, settings, tmp_path, 1_500, resume=True)
    assert sorted(concepts_log.glob("*.json")) == versions  # the graph's tables were not written again
    assert {k: resumed["seconds"][k] for k in ("counts", "graph")} == {
        k: first["seconds"][k] for k in ("counts", "graph")
    }
    assert resumed["kept_edges"] == first["kept_edges"]
    assert (tmp_path / "stages" / "communities.json").exists()

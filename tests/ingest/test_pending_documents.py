"""Which input documents an index run takes up (Spark, local): new and changed ones are pending, and
only changed ones (an id the index holds with other text) have old chunks to replace, so an input of
new documents alone skips that search."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from lazygraph.ingest.stage import chunk_pending, read_pending, write_chunks, write_documents
from lazygraph.run_context import RunContext, RunLog
from lazygraph.tables.store import IndexStore

TEXT = "The harbour wall at Port Ellery was raised after the storm surge of that winter. " * 3


def _run(spark, settings, index: Path, docs: dict[str, str], path: Path):
    """Read, chunk and write ``docs`` as an index run does (chunks, then documents)."""
    path.write_text("".join(json.dumps({"doc_id": d, "title": d, "text": t}) + "\n" for d, t in docs.items()))
    store = IndexStore(spark, str(index), settings=settings)
    ctx = RunContext(spark, settings, store, RunLog(Console(quiet=True)), input_path=str(path))
    intake = read_pending(ctx)
    chunks = chunk_pending(ctx, intake)
    replaced = None
    if chunks.replaced is not None:
        replaced = sorted(r["chunk_id"] for r in chunks.replaced.collect())
    write_chunks(ctx, chunks)
    write_documents(ctx, intake)
    pending = sorted(r["doc_id"] for r in intake.pending.select("doc_id").collect())
    return pending, intake.n_replacing, replaced


def test_only_changed_documents_are_searched_for_chunks_to_replace(spark, settings, tmp_path) -> None:
    index = tmp_path / "index"
    first = {"a": TEXT, "b": "Gull Point " + TEXT}
    assert _run(spark, settings, index, first, tmp_path / "1.jsonl") == (["a", "b"], 0, None)

    # a again unchanged, c new: nothing the index holds is replaced, and no search for it runs.
    new_only = {"a": TEXT, "c": "Chandlers Row " + TEXT}
    assert _run(spark, settings, index, new_only, tmp_path / "2.jsonl") == (["c"], 0, None)

    # b with other text: pending, replacing one document, whose old chunk is listed for deletion.
    changed = {"b": "The eelgrass meadows recovered by the next summer.", "d": "Oysters " + TEXT}
    pending, n_replacing, replaced = _run(spark, settings, index, changed, tmp_path / "3.jsonl")
    assert pending == ["b", "d"] and n_replacing == 1
    assert replaced is not None and len(replaced) == 1

"""A snapshot crosses process boundaries as a few large buffers: no Python object per chunk or term."""

from __future__ import annotations

import pickle

import numpy as np
import pyarrow as pa
import pytest
from support.fakes import TinyIndex

from lazygraph.query.snapshot.text import TextColumn


def test_a_text_column_reads_like_a_list_of_strings() -> None:
    column = TextColumn.from_arrow(pa.chunked_array([["héllo", None], ["", "wörld"]]))
    assert len(column) == 4 and column.tolist() == ["héllo", None, "", "wörld"]
    assert column[-1] == "wörld" and column[np.int64(1)] is None
    assert np.asarray(column).dtype == object and list(np.asarray(column)) == column.tolist()
    with pytest.raises(IndexError):
        column[4]
    assert column[np.array([True, False, False, True])].tolist() == ["héllo", "wörld"]
    assert column[[3, 0]].tolist() == ["wörld", "héllo"]
    assert TextColumn.from_strings([]).tolist() == []


def test_a_sliced_arrow_column_keeps_only_its_own_strings() -> None:
    column = TextColumn.from_arrow(pa.array(["a", "bb", "ccc", "dddd"]).slice(1, 2))
    assert column.tolist() == ["bb", "ccc"] and column.data.nbytes == 5


def test_a_pickled_snapshot_carries_its_texts_out_of_band() -> None:
    texts = [f"Chunk {i} says something long enough to matter. " * 20 for i in range(400)]
    snapshot = TinyIndex(texts=texts).snapshot()
    buffers: list[pickle.PickleBuffer] = []
    inline = pickle.dumps(snapshot, protocol=5, buffer_callback=buffers.append)
    out_of_band = sum(memoryview(b).nbytes for b in buffers)
    text_bytes = sum(len(t.encode()) for t in texts)
    # Texts and arrays travel as buffers (shared, not copied, by Ray's object store); what is pickled
    # inline is small and does not grow with the texts.
    assert out_of_band >= text_bytes and len(inline) < text_bytes / 20
    copy = pickle.loads(inline, buffers=buffers)
    assert copy.passage(7) == snapshot.passage(7) and copy.chunk_ids.tolist() == snapshot.chunk_ids.tolist()

"""The index job's embedding stage body: Arrow batches gathered into fewer model calls, rows kept in
order with their ids (the real packaged model, no Spark)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from lazygraph.embed.embedder import get_embedder
from lazygraph.embed.stage import embed_batches, gathered
from lazygraph.settings import load_settings


def frames(sizes: list[int]) -> list[pd.DataFrame]:
    out, n = [], 0
    for size in sizes:
        ids = [f"c{n + i}" for i in range(size)]
        # lengths vary a lot, so a call sorts them into differently padded batches
        texts = [f"chunk {n + i} " + "about the estuary and its tides " * ((n + i) % 7) for i in range(size)]
        out.append(pd.DataFrame({"chunk_id": ids, "text": texts}))
        n += size
    return out


def test_batches_are_gathered_in_order_up_to_the_rows_asked() -> None:
    sizes = [len(f) for f in gathered(iter(frames([3, 3, 3, 3, 1])), 5)]
    assert sizes == [6, 6, 1]
    joined = pd.concat(list(gathered(iter(frames([2, 5, 1])), 4)), ignore_index=True)
    assert joined["chunk_id"].tolist() == [f"c{i}" for i in range(8)]
    assert [len(f) for f in gathered(iter(frames([4])), 100)] == [4]
    assert list(gathered(iter([]), 10)) == []


def test_gathered_calls_give_each_chunk_its_own_vector() -> None:
    cfg = load_settings(embedding={"rows_per_call": 7}).embedding
    rows = pd.concat(list(embed_batches(iter(frames([4, 4, 4, 2])), cfg, 1)), ignore_index=True)
    assert rows["chunk_id"].tolist() == [f"c{i}" for i in range(14)]
    texts = pd.concat(frames([4, 4, 4, 2]))["text"].tolist()
    alone = get_embedder(cfg, 1).encode_for_storage(texts)  # every text in one call
    stored = np.stack([np.frombuffer(b, dtype=cfg.storage_dtype) for b in rows["embedding"]])
    assert stored.shape == alone.shape
    # the same vector whichever call held the chunk (float16 storage: a last-digit difference at most)
    assert np.abs(stored.astype(np.float32) - alone.astype(np.float32)).max() < 2e-3
    assert (rows["model"] == cfg.model).all() and (rows["dim"] == stored.shape[1]).all()

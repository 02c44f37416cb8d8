"""Concept vectors carried over from the index's previous store instead of encoded again.

Every index run builds a new store, and the store holds a vector for each kept concept's name. An
append changes a few hundred concepts of tens of thousands (millions, on a large corpus), yet encoding
every name again took most of a small append's store build. A concept whose id and name are those of a
row of an earlier complete store, encoded by the same model, gets that row's vector; the rest are
encoded. The vector of a name depends only on the model and the name, so a store built this way holds
what a store built from scratch holds.

"The same model" is an encoder key: a digest of the embedding settings that decide a vector
(``encoder_key``). A store records the key of the encoder that filled it (``concept_encoder`` in its
``store.json``); an encoder without a key (a test's, a benchmark's) neither reuses nor offers vectors.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lazygraph.serving import layout
from lazygraph.settings import EmbeddingSettings, Settings

# The embedding settings that change what vector a name gets (threads and batch sizes do not).
_VECTOR_FIELDS = ("backend", "model", "onnx_file", "tokenizer_dir", "device", "max_seq_length")


def encoder_key(embedding: EmbeddingSettings) -> str:
    """A digest of the embedding settings that decide a name's vector."""
    fields = embedding.model_dump(mode="json", include=set(_VECTOR_FIELDS))
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class EarlierVectors:
    """The concepts dataset of an earlier complete store of the same index and encoder."""

    store: str
    dataset: Any
    dimension: int

    def lookup(self, ids: pa.Array, names: pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """(found, vectors): whether each (id, name) has a vector in the earlier store, and an array of
        ``len(ids)`` rows holding it where found (zeros elsewhere). One indexed read per call."""
        rows = self.dataset.to_table(
            columns=["concept_id", "name", "vector"], filter=pc.field("concept_id").isin(ids)
        )
        vectors = np.zeros((len(ids), self.dimension), dtype=np.float32)
        if rows.num_rows == 0:
            return np.zeros(len(ids), dtype=bool), vectors
        at = pc.index_in(ids, value_set=rows.column("concept_id"))
        same_name = pc.equal(rows.column("name").take(pc.fill_null(at, 0)), names)
        found = pc.and_(pc.is_valid(at), pc.fill_null(same_name, False)).to_numpy(zero_copy_only=False)
        earlier = rows.column("vector").combine_chunks()
        flat = earlier.values.to_numpy(zero_copy_only=False).reshape(-1, self.dimension)
        vectors[found] = flat[at.to_numpy(zero_copy_only=False)[found].astype(np.int64)]
        return found, vectors


def find_earlier(index_uri: str, store: str, settings: Settings, key: str | None) -> EarlierVectors | None:
    """The newest complete store of the index other than ``store``, of this store format, whose concept
    vectors the encoder ``key`` made; None when there is none (or no key)."""
    if key is None:
        return None
    newest: tuple[str, dict[str, Any]] | None = None
    for other in layout.list_stores(index_uri, settings):
        meta = layout.read_meta(other, settings) if other != store else None
        if (
            meta is None
            or meta.get("format") != layout.FORMAT
            or meta.get("concept_encoder") != key
            or not meta.get("datasets", {}).get(layout.CONCEPTS)
        ):
            continue
        if newest is None or str(meta.get("created_at", "")) > str(newest[1].get("created_at", "")):
            newest = (other, meta)
    if newest is None:
        return None
    import lance

    store_uri = newest[0]
    options = layout.lance_options(store_uri, settings)
    dataset = lance.dataset(layout.dataset_uri(store_uri, layout.CONCEPTS), storage_options=options)
    vector = dataset.schema.field("vector").type if "vector" in dataset.schema.names else None
    if vector is None or not pa.types.is_fixed_size_list(vector):
        return None
    return EarlierVectors(store_uri, dataset, vector.list_size)

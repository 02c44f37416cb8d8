"""A store takes the concept vectors an earlier store of the same index and model encoded: only names it
has not seen are encoded, and the vectors are those a build from scratch gives."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from support.fakes import HashEmbedder, tiny_serving_index, write_manifest

from lazygraph import tables
from lazygraph.serving import build_store, layout
from lazygraph.serving.earlier_vectors import encoder_key
from lazygraph.serving.publish import ConceptEncoder
from lazygraph.settings import Settings, load_settings


class KeyedEncoder:
    """HashEmbedder's vectors under an encoder key, remembering every name it was asked to encode."""

    def __init__(self, key: str | None) -> None:
        self.key = key
        self.model = HashEmbedder()
        self.encoded: list[str] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.encoded.extend(texts)
        return self.model.encode(texts)


@pytest.fixture()
def settings(tmp_path: Path) -> Settings:
    return load_settings(home=tmp_path / "home")


@pytest.fixture()
def index(tmp_path: Path) -> str:
    return tiny_serving_index(tmp_path, HashEmbedder())


def _next_version_with_concepts(index: str, rename: dict[str, str], add: list[str]) -> None:
    """A later run whose concepts table renames some concepts (same ids) and adds kept ones."""
    from deltalake import DeltaTable, write_deltalake

    root = Path(index)
    concepts = DeltaTable(str(root / tables.CONCEPTS)).to_pyarrow_table()
    names = [rename.get(name, name) for name in concepts.column("name").to_pylist()]
    concepts = concepts.set_column(concepts.schema.get_field_index("name"), "name", pa.array(names))
    first = concepts.slice(0, 1).to_pylist()[0]
    extra = [{**first, "concept_id": f"new-{name}", "name": name} for name in add]
    concepts = pa.concat_tables([concepts, pa.Table.from_pylist(extra, schema=concepts.schema)])
    write_deltalake(str(root / tables.CONCEPTS), concepts, mode="overwrite")
    versions = {
        name: DeltaTable(str(root / name)).version() for name in layout.SOURCES if (root / name).exists()
    }
    write_manifest(root, versions, run_id="second")


def _store_vectors(store: str) -> dict[str, np.ndarray]:
    import lance

    rows = lance.dataset(layout.dataset_uri(store, layout.CONCEPTS)).to_table(columns=["name", "vector"])
    vectors = np.asarray(rows.column("vector").to_pylist())
    return dict(zip(rows.column("name").to_pylist(), vectors, strict=True))


def test_a_later_store_encodes_only_the_names_it_has_not_seen(index, settings) -> None:
    first = KeyedEncoder("model-a")
    meta = build_store(index, settings, encode=first)
    assert sorted(first.encoded) == ["harbour", "tide"]
    assert meta["concept_encoder"] == "model-a" and meta["concept_vectors_reused"] == 0

    _next_version_with_concepts(index, rename={"harbour": "harbours"}, add=["moon"])
    second = KeyedEncoder("model-a")
    later = build_store(index, settings, encode=second)
    assert later["store"] != meta["store"]
    # "tide" is taken over; a renamed concept (same id) and a new one are encoded.
    assert sorted(second.encoded) == ["harbours", "moon"]
    assert later["concept_vectors_reused"] == 1
    scratch = HashEmbedder()
    for name, vector in _store_vectors(later["store"]).items():
        np.testing.assert_allclose(vector, scratch.encode([name])[0], atol=1e-6)


@pytest.mark.parametrize("key", ["model-b", None])
def test_vectors_of_another_model_or_an_unnamed_one_are_never_taken(index, settings, key) -> None:
    build_store(index, settings, encode=KeyedEncoder("model-a"))
    _next_version_with_concepts(index, rename={}, add=["moon"])
    other = KeyedEncoder(key)
    later = build_store(index, settings, encode=other)
    assert sorted(other.encoded) == ["harbour", "moon", "tide"]
    assert later["concept_vectors_reused"] == 0


def test_reuse_turned_off_encodes_every_name_again(index, settings) -> None:
    build_store(index, settings, encode=KeyedEncoder("model-a"))
    _next_version_with_concepts(index, rename={}, add=["moon"])
    off = settings.model_copy(
        update={"serving": settings.serving.model_copy(update={"reuse_concept_vectors": False})}
    )
    again = KeyedEncoder("model-a")
    later = build_store(index, off, encode=again)
    assert sorted(again.encoded) == ["harbour", "moon", "tide"]
    assert later["concept_vectors_reused"] == 0


def test_the_encoder_key_follows_the_model_not_its_threads(settings) -> None:
    same = settings.embedding.model_copy(update={"threads": 1, "batch_size": 7, "rows_per_call": 3})
    other = settings.embedding.model_copy(update={"max_seq_length": 128})
    assert encoder_key(same) == encoder_key(settings.embedding) == ConceptEncoder(settings).key
    assert encoder_key(other) != encoder_key(settings.embedding)

"""Where the approximate index lives beside the Delta tables, and how a query process loads it.

    <index>/vector_index/embeddings-v<version>/
        trained.faiss   the trained, empty index (list centroids, quantiser ranges): a few MB
        codes/          Parquet (chunk_id, code): every chunk's list number and quantised vector
        meta.json       written last: a build is complete exactly when it exists

One build per chunk_embeddings Delta version: a query reads the build of the version its index's last
complete run recorded (``load_snapshot`` pins every table so), so a run in progress, or one killed
midway, is never mixed in. The codes are stored by chunk id, not position: a snapshot's chunk order is
the chunks table's, which the index does not fix.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lazygraph import tables
from lazygraph.errors import IndexStateError
from lazygraph.runtime import storage
from lazygraph.settings import VectorIndexSettings
from lazygraph.vectors.ann import VectorIndex

if TYPE_CHECKING:
    from lazygraph.tables import StorageSource

VECTOR_INDEX_DIR = "vector_index"
META = "meta.json"
TRAINED = "trained.faiss"
CODES = "codes"


def build_uri(index_uri: str, embeddings_version: int) -> str:
    """The directory of the build for one chunk_embeddings version."""
    return f"{tables.normalise_index_uri(index_uri)}/{VECTOR_INDEX_DIR}/embeddings-v{embeddings_version:06d}"


def arrow_fs(uri: str, settings: StorageSource = None) -> tuple[Any, str]:
    """The pyarrow filesystem of ``uri`` and the path inside it."""
    return storage.arrow_filesystem(uri, tables.storage_settings(settings)), storage.arrow_path(uri)


def read_meta(build: str, settings: StorageSource = None) -> dict[str, Any] | None:
    """The build's meta.json, or None when the build is absent or unfinished."""
    import pyarrow.fs as pafs

    fs, path = arrow_fs(build, settings)
    if fs.get_file_info(f"{path}/{META}").type != pafs.FileType.File:
        return None
    with fs.open_input_stream(f"{path}/{META}") as f:
        return json.loads(f.read().decode())


def write_file(uri: str, data: bytes, settings: StorageSource = None) -> None:
    fs, path = arrow_fs(uri, settings)
    fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    with fs.open_output_stream(path) as f:
        f.write(data)


def read_file(uri: str, settings: StorageSource = None) -> bytes:
    fs, path = arrow_fs(uri, settings)
    with fs.open_input_stream(path) as f:
        return f.read()


def list_builds(index_uri: str, settings: StorageSource = None) -> list[str]:
    """URIs of every build directory of the index, oldest version first."""
    import pyarrow.fs as pafs

    root = f"{tables.normalise_index_uri(index_uri)}/{VECTOR_INDEX_DIR}"
    fs, path = arrow_fs(root, settings)
    if fs.get_file_info(path).type != pafs.FileType.Directory:
        return []
    names = sorted(
        info.base_name
        for info in fs.get_file_info(pafs.FileSelector(path))
        if info.type == pafs.FileType.Directory and info.base_name.startswith("embeddings-v")
    )
    return [f"{root}/{name}" for name in names]


def delete_build(build: str, settings: StorageSource = None) -> None:
    fs, path = arrow_fs(build, settings)
    fs.delete_dir(path)


def fixed_width_binary(column: pa.Array | pa.ChunkedArray, width: int) -> np.ndarray:
    """A binary column whose values all have ``width`` bytes as an (n, width) uint8 array."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks else pa.array([], pa.binary())
    if not (pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type)):
        column = column.cast(pa.large_binary())
    n = len(column)
    if n == 0:
        return np.zeros((0, width), np.uint8)
    offset_type = np.int64 if pa.types.is_large_binary(column.type) else np.int32
    offsets = np.frombuffer(column.buffers()[1], dtype=offset_type)[column.offset : column.offset + n + 1]
    if column.null_count or not np.all(np.diff(offsets) == width):
        raise IndexStateError(
            f"the vector index holds codes that are not {width} bytes long; rebuild it with `lazygraph index`"
        )
    data = np.frombuffer(column.buffers()[2], dtype=np.uint8)
    return data[offsets[0] : offsets[-1]].reshape(n, width)


def usable_build(
    index_uri: str, embeddings_version: int, cfg: VectorIndexSettings, settings: StorageSource = None
) -> str | None:
    """The build a query should use: the complete one for ``embeddings_version`` when it holds at
    least ``cfg.ann_min_chunks`` vectors; None means exact search (no build: a small index, or one
    built before this index existed, which the next `lazygraph index` run builds)."""
    build = build_uri(index_uri, embeddings_version)
    meta = read_meta(build, settings)
    if meta is None or int(meta.get("vectors", 0)) < cfg.ann_min_chunks:
        return None
    return build


def load_vector_index(
    build: str,
    locate: Callable[[pa.Array], np.ndarray],
    cfg: VectorIndexSettings,
    settings: StorageSource = None,
) -> VectorIndex:
    """The build's index with every stored code added under its chunk's position, which ``locate``
    gives for an array of chunk ids (-1 for a chunk the reader does not hold: its code is left out).
    Read batch by batch: the codes are held once, inside the index."""
    import pyarrow.dataset as ds

    index = VectorIndex.from_bytes(np.frombuffer(read_file(f"{build}/{TRAINED}", settings), np.uint8), cfg)
    index.origin = build
    fs, path = arrow_fs(f"{build}/{CODES}", settings)
    dataset = ds.dataset(path, format="parquet", filesystem=fs)
    for batch in dataset.to_batches(columns=["chunk_id", "code"], batch_size=262_144):
        pos = locate(batch.column(0))
        codes = fixed_width_binary(batch.column(1), index.code_size)
        found = pos >= 0
        if found.any():
            index.add_codes(codes[found], pos[found])
    return index

"""`lazygraph show`: resolve a citation to the text behind it.

Answers cite chunk ids; a reader checking one wants the chunk's text and the document it comes from.
The lookup reads only the matching rows of the chunks and documents tables (deltalake filters, no
JVM, no embeddings), so it is instant on any index size. A document id prints all its chunks.
"""

from __future__ import annotations

from typing import Any

from lazygraph import tables
from lazygraph.errors import IndexNotFoundError, InputError
from lazygraph.tables.read import read_table


def _rows(
    index: str, table: str, column: str, value: str, settings: tables.StorageSource
) -> list[dict[str, Any]]:
    handle = tables.open_delta(tables.table_uri(index, table), settings=settings)
    if handle is None:
        raise IndexNotFoundError(
            f"no {table} table under {index}; build the index first with "
            f"`lazygraph index --input ... --index {index}`"
        )
    import pyarrow.dataset as ds

    return read_table(handle, settings, filter=ds.field(column) == value).to_pylist()


def find_chunks(index: str, ident: str, settings: tables.StorageSource = None) -> list[dict[str, Any]]:
    """The chunk with this id, or every chunk of the document with this id, each with its document
    (``settings``: how to reach the index's storage)."""
    ident = ident.strip()
    if not ident:
        raise InputError("give a chunk id (as cited in an answer's [Data: Sources (...)]) or a document id")
    chunks = _rows(index, tables.CHUNKS, "chunk_id", ident, settings) or _rows(
        index, tables.CHUNKS, "doc_id", ident, settings
    )
    if not chunks:
        raise InputError(
            f"{ident!r} is neither a chunk id nor a document id in {index}; copy an id from an answer's "
            "[Data: Sources (...)] or from `lazygraph query --json` (context_chunk_ids)"
        )
    doc_id = chunks[0]["doc_id"]
    documents = {d["doc_id"]: d for d in _rows(index, tables.DOCUMENTS, "doc_id", doc_id, settings)}
    n_chunks = len(_rows(index, tables.CHUNKS, "doc_id", doc_id, settings))
    found = []
    for chunk in sorted(chunks, key=lambda c: c["ord"]):
        doc = documents.get(chunk["doc_id"], {})
        found.append(
            {
                "chunk_id": chunk["chunk_id"],
                "doc_id": chunk["doc_id"],
                "title": chunk.get("title") or doc.get("title") or "",
                "ord": int(chunk["ord"]),
                "chunks_in_document": n_chunks,
                "source": doc.get("source"),
                "text": chunk["text"],
            }
        )
    return found


def render_chunks(found: list[dict[str, Any]]) -> str:
    blocks = []
    for c in found:
        header = (
            f"chunk {c['chunk_id']} — part {c['ord'] + 1} of {c['chunks_in_document']} of document "
            f'{c["doc_id"]} "{c["title"]}"'
        )
        source = f"\nsource: {c['source']}" if c.get("source") else ""
        blocks.append(f"{header}{source}\n\n{c['text']}")
    return "\n\n".join(blocks)

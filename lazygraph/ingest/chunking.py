"""Token-window chunking with tiktoken, run per Arrow batch inside Spark (``mapInPandas``)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import pandas as pd

from lazygraph.settings import ChunkingSettings
from lazygraph.tables import CHUNKS
from lazygraph.tables.schemas import spark_schema

_ENCODINGS: dict[str, Any] = {}


def get_encoding(name: str) -> Any:
    """The tiktoken encoding, loaded once per Python worker."""
    if name not in _ENCODINGS:
        import tiktoken

        _ENCODINGS[name] = tiktoken.get_encoding(name)
    return _ENCODINGS[name]


def token_windows(n_tokens: int, size: int, overlap: int) -> list[tuple[int, int]]:
    """[start, end) windows of at most ``size`` tokens, consecutive ones sharing ``overlap`` tokens."""
    if n_tokens <= 0:
        return []
    step = size - overlap
    windows = []
    start = 0
    while True:
        end = min(start + size, n_tokens)
        windows.append((start, end))
        if end >= n_tokens:
            return windows
        start += step


def chunk_id(doc_id: str, ord_: int, text: str) -> str:
    """Stable content hash: the same document text always yields the same chunk ids."""
    return hashlib.sha256(f"{doc_id}\x1f{ord_}\x1f{text}".encode()).hexdigest()[:16]


def chunk_text(encoding: Any, text: str, size: int, overlap: int) -> list[tuple[str, int]]:
    """(chunk text, token count) for each window of one document."""
    tokens = encoding.encode_ordinary(text)
    pieces = []
    for start, end in token_windows(len(tokens), size, overlap):
        # A window edge may split a multi-byte character; the partial bytes are dropped.
        piece = encoding.decode_bytes(tokens[start:end]).decode("utf-8", errors="ignore").strip()
        if piece:
            pieces.append((piece, end - start))
    return pieces


def chunk_batches(batches: Iterator[pd.DataFrame], cfg: ChunkingSettings) -> Iterator[pd.DataFrame]:
    """mapInPandas body: documents (doc_id, title, text) -> rows of the chunks table."""
    encoding = get_encoding(cfg.encoding)
    for batch in batches:
        rows: dict[str, list] = {k: [] for k in ("chunk_id", "doc_id", "title", "ord", "text", "n_tokens")}
        for doc_id, title, text in zip(batch["doc_id"], batch["title"], batch["text"], strict=True):
            for ord_, (piece, n_tokens) in enumerate(
                chunk_text(encoding, text, cfg.chunk_tokens, cfg.overlap_tokens)
            ):
                rows["chunk_id"].append(chunk_id(doc_id, ord_, piece))
                rows["doc_id"].append(doc_id)
                rows["title"].append(title)
                rows["ord"].append(ord_)
                rows["text"].append(piece)
                rows["n_tokens"].append(n_tokens)
        out = pd.DataFrame(rows)
        yield out.astype({"ord": "int32", "n_tokens": "int32"})


def chunk_documents(documents_df: Any, cfg: ChunkingSettings) -> Any:
    """Spark DataFrame of chunks for the given documents (lazy)."""
    return documents_df.select("doc_id", "title", "text").mapInPandas(
        lambda batches: chunk_batches(batches, cfg), schema=spark_schema(CHUNKS)
    )

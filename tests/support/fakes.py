"""Deterministic stand-ins for the query tests: a fake LLM, a hashed bag-of-words embedder and a
builder of small synthetic indexes (as Arrow tables, or written as Delta tables)."""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from lazygraph import tables
from lazygraph.llm.base import ChatResult, LLMClient, Message
from lazygraph.llm.factory import LLMRoles
from lazygraph.llm.prompts import load_prompt
from lazygraph.query.snapshot import IndexSnapshot, build_snapshot

DIM = 64
_WORD = re.compile(r"\w+")


class HashEmbedder:
    """Unit vectors of hashed word counts: texts sharing words are similar, deterministically."""

    def __init__(self, dim: int = DIM) -> None:
        self.dimension = dim
        self.calls = 0

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in _WORD.findall(str(text).lower()):
                out[i, zlib.crc32(word.encode()) % self.dimension] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.divide(out, norms, out=np.zeros_like(out), where=norms > 0)


def _task(messages: Sequence[Message]) -> str:
    system = messages[0]["content"]
    tasks = ("refine", "map_claims", "reduce", "reduce_global", "vector_answer", "relevance", "answer_span")
    for task in tasks:
        if load_prompt(task).system == system:
            return task
    return "unknown"


@dataclass
class FakeLLM(LLMClient):
    """Relevance: P(yes) = 0.9 when ``is_relevant(question, passage)``, else 0.1.
    Chat: canned, well-formed replies per prompt task (or ``refine_reply`` for refine)."""

    is_relevant: Callable[[str, str], bool] = lambda q, p: "REL" in p
    refine_reply: str | None = None
    map_reply: str | None = None
    answer_reply: str = '{"sentences": [{"text": "The answer is in the facts.", "facts": [1, 2]}]}'
    span_reply: str = "unknown"
    tasks: list[str] = field(default_factory=list)
    relevance_batches: list[int] = field(default_factory=list)
    # What the LLM cache's keys name it by (a client without a model id is given no cache).
    model_id: str = "fake:llm"

    def __post_init__(self) -> None:
        LLMClient.__init__(self, "relevance")

    def _chat(self, messages, *, max_tokens, temperature, json_schema) -> ChatResult:
        task = _task(messages)
        self.tasks.append(task)
        user = messages[-1]["content"]
        if task == "refine":
            question = user.split("Question: ", 1)[1].split("\n", 1)[0]
            text = self.refine_reply or json.dumps(
                {
                    "scope": "local",
                    "subqueries": [f"{question} part {i}" for i in ("one", "two", "three")],
                    "expanded_query": f"{question} (expanded)",
                }
            )
        elif task == "map_claims":
            passages = re.findall(r'^<passage id="(\d+)">\n(.*)\n(.*)$', user, flags=re.M)
            text = self.map_reply or json.dumps(
                {
                    "claims": [
                        {"text": f"{title} states: {body[:60]}", "sources": [int(n)]}
                        for n, title, body in passages
                    ]
                }
            )
        elif task == "answer_span":
            text = self.span_reply
        else:
            text = self.answer_reply
        return ChatResult(
            text=text, prompt_tokens=len(user) // 4, completion_tokens=len(text) // 4, seconds=0.0
        )

    def _relevance(self, messages_per_passage):
        self.relevance_batches.append(len(messages_per_passage))
        out = []
        for messages in messages_per_passage:
            user = messages[-1]["content"]
            question = user.split("Question: ", 1)[1].split("\n", 1)[0]
            passage = user.split("<passage>\n", 1)[1].rsplit("\n</passage>", 1)[0]
            out.append((0.9 if self.is_relevant(question, passage) else 0.1, len(user) // 4, 0.0))
        return out


def fake_roles(llm: FakeLLM) -> LLMRoles:
    return LLMRoles(relevance=llm, synthesis=llm)


@dataclass
class TinyIndex:
    """A synthetic index: chunks with texts, a community tree, chunk memberships, optional concepts."""

    texts: list[str]
    doc_ids: list[str] | None = None
    titles: list[str] | None = None
    # community id -> (level, parent id or None)
    communities: dict[str, tuple[int, str | None]] = field(default_factory=dict)
    # (chunk number, level, community id)
    memberships: list[tuple[int, int, str]] = field(default_factory=list)
    # concept name -> chunk numbers mentioning it
    concepts: dict[str, list[int]] = field(default_factory=dict)
    edges: list[tuple[str, str]] = field(default_factory=list)
    embeddings: np.ndarray | None = None

    def chunk_id(self, i: int) -> str:
        return f"c{i:04d}"

    def arrow(self, embedder: HashEmbedder | None = None) -> dict[str, pa.Table]:
        n = len(self.texts)
        doc_ids = self.doc_ids or [f"d{i:04d}" for i in range(n)]
        titles = self.titles or [f"Title {i}" for i in range(n)]
        vectors = self.embeddings
        if vectors is None:
            vectors = (embedder or HashEmbedder()).encode(
                [f"{t}\n{x}" for t, x in zip(titles, self.texts, strict=True)]
            )
        vectors = np.asarray(vectors, dtype=np.float16)
        concept_names = list(self.concepts)
        concept_id = {name: f"k{j:04d}" for j, name in enumerate(concept_names)}
        comm_rows = list(self.communities.items())
        top = {cid: [] for cid in self.communities}
        cc_rows = []
        for name, members in self.concepts.items():
            for chunk in members:
                for ch, level, cid in self.memberships:
                    if ch == chunk and name not in top[cid]:
                        top[cid].append(name)
                        cc_rows.append((concept_id[name], level, cid))
        seen_cc = {}
        for kid, level, cid in cc_rows:
            seen_cc.setdefault((kid, level), cid)
        return {
            tables.CHUNKS: pa.table(
                {
                    "chunk_id": [self.chunk_id(i) for i in range(n)],
                    "doc_id": doc_ids,
                    "title": titles,
                    "ord": pa.array([0] * n, pa.int32()),
                    "text": self.texts,
                    "n_tokens": pa.array([max(1, len(t.split())) for t in self.texts], pa.int32()),
                }
            ),
            tables.CHUNK_EMBEDDINGS: pa.table(
                {
                    "chunk_id": [self.chunk_id(i) for i in range(n)],
                    "embedding": pa.array([v.tobytes() for v in vectors], pa.binary()),
                    "dtype": ["float16"] * n,
                    "dim": pa.array([vectors.shape[1] if n else DIM] * n, pa.int32()),
                    "model": ["hash"] * n,
                }
            ),
            tables.COMMUNITIES: pa.table(
                {
                    "community_id": [c for c, _ in comm_rows],
                    "level": pa.array([lv for _, (lv, _) in comm_rows], pa.int32()),
                    "parent_id": pa.array([p for _, (_, p) in comm_rows], pa.string()),
                    "size": pa.array([len(top[c]) for c, _ in comm_rows], pa.int64()),
                    "n_chunks": pa.array(
                        [sum(1 for m in self.memberships if m[2] == c) for c, _ in comm_rows], pa.int64()
                    ),
                    "top_concepts": pa.array([top[c][:10] for c, _ in comm_rows], pa.list_(pa.string())),
                }
            ),
            tables.CHUNK_COMMUNITIES: pa.table(
                {
                    "chunk_id": [self.chunk_id(ch) for ch, _, _ in self.memberships],
                    "level": pa.array([lv for _, lv, _ in self.memberships], pa.int32()),
                    "community_id": [c for _, _, c in self.memberships],
                    "weight": pa.array([1.0] * len(self.memberships), pa.float64()),
                }
            ),
            tables.CONCEPTS: pa.table(
                {
                    "concept_id": [concept_id[c] for c in concept_names],
                    "name": concept_names,
                    "kind": ["phrase"] * len(concept_names),
                    "frequency": pa.array([len(self.concepts[c]) for c in concept_names], pa.int64()),
                    "chunk_frequency": pa.array([len(self.concepts[c]) for c in concept_names], pa.int64()),
                    "doc_frequency": pa.array([len(self.concepts[c]) for c in concept_names], pa.int64()),
                    "degree": pa.array([1] * len(concept_names), pa.int64()),
                    "kept": [True] * len(concept_names),
                }
            ),
            tables.MENTIONS: pa.table(
                {
                    "chunk_id": [self.chunk_id(ch) for c in concept_names for ch in self.concepts[c]],
                    "concept_id": [concept_id[c] for c in concept_names for _ in self.concepts[c]],
                    "count": pa.array([1 for c in concept_names for _ in self.concepts[c]], pa.int32()),
                }
            ),
            tables.EDGES: pa.table(
                {
                    "src": [min(concept_id[a], concept_id[b]) for a, b in self.edges],
                    "dst": [max(concept_id[a], concept_id[b]) for a, b in self.edges],
                    "cooccurrence": pa.array([1] * len(self.edges), pa.int64()),
                    "weight": pa.array([0.5] * len(self.edges), pa.float64()),
                    "kept": [True] * len(self.edges),
                }
            ),
            tables.CONCEPT_COMMUNITIES: pa.table(
                {
                    "concept_id": [k for k, _ in seen_cc],
                    "level": pa.array([lv for _, lv in seen_cc], pa.int32()),
                    "community_id": list(seen_cc.values()),
                }
            ),
        }

    def snapshot(self, embedder: HashEmbedder | None = None) -> IndexSnapshot:
        return build_snapshot("memory://tiny", (), self.arrow(embedder))

    def write_delta(self, root: Path, embedder: HashEmbedder | None = None, terms: bool = False) -> str:
        """The tables as Delta tables (with ``terms``, the lexical statistics too), then the manifest row
        of a complete run that records them."""
        from deltalake import DeltaTable, write_deltalake

        versions = {}
        written = with_terms(self, embedder) if terms else self.arrow(embedder)
        for name, table in written.items():
            write_deltalake(str(root / name), table, mode="overwrite")
            versions[name] = DeltaTable(str(root / name)).version()
        write_manifest(root, versions)
        return str(root)


def terms_table(index: TinyIndex) -> pa.Table:
    """The chunk_terms rows the index job would write for these chunks."""
    from lazygraph.lexical.terms import term_counts

    rows = [
        (index.chunk_id(i), t, n) for i, text in enumerate(index.texts) for t, n in term_counts(text).items()
    ]
    return pa.table(
        {
            "chunk_id": [r[0] for r in rows],
            "term": [r[1] for r in rows],
            "count": pa.array([r[2] for r in rows], pa.int32()),
        }
    )


def with_terms(index: TinyIndex, embedder: HashEmbedder | None = None) -> dict[str, pa.Table]:
    """The index's tables plus its lexical statistics (chunk_terms)."""
    return {**index.arrow(embedder), tables.CHUNK_TERMS: terms_table(index)}


def write_manifest(
    root: Path,
    versions: dict[str, int],
    status: str = "complete",
    run_id: str = "run",
    counts: dict[str, int] | None = None,
) -> None:
    """Append a manifest row like the pipeline's, recording these table versions (and, given
    ``counts``, the row counts per table the pipeline records)."""
    from datetime import UTC, datetime

    from deltalake import write_deltalake

    now = datetime.now(UTC)
    row = {
        "run_id": run_id,
        "mode": "create",
        "input": "memory",
        "status": status,
        "started_at": now,
        "finished_at": now,
        "settings_json": "{}",
        "counts_json": json.dumps({"tables": counts}) if counts else "{}",
        "versions_json": json.dumps({"packages": {}, "tables": {n: [v, 0] for n, v in versions.items()}}),
        "timings_json": "{}",
    }
    schema = pa.schema([(k, pa.timestamp("us", tz="UTC") if k.endswith("_at") else pa.string()) for k in row])
    write_deltalake(str(root / tables.MANIFEST), pa.Table.from_pylist([row], schema=schema), mode="append")


def two_level_tree(
    n_roots: int, children: int, chunks_per_leaf: int
) -> tuple[TinyIndex, dict[str, list[int]]]:
    """Roots R0.. each with ``children`` leaves R0.0..; chunks numbered leaf by leaf. Returns the index and
    each community's chunks."""
    index = TinyIndex(texts=[])
    members: dict[str, list[int]] = {}
    for r in range(n_roots):
        root = f"R{r}"
        index.communities[root] = (0, None)
        members[root] = []
        for c in range(children):
            leaf = f"R{r}.{c}"
            index.communities[leaf] = (1, root)
            members[leaf] = []
            for _ in range(chunks_per_leaf):
                i = len(index.texts)
                index.texts.append(f"chunk {i}")
                index.memberships += [(i, 0, root), (i, 1, leaf)]
                members[root].append(i)
                members[leaf].append(i)
    return index, members


def tiny_serving_index(root: Path, embedder: HashEmbedder) -> str:
    """Six chunks about the tide and the harbour, two concepts and one community, written as Delta tables
    under ``root``: the smallest index a serving store is built from."""
    tiny = TinyIndex(
        texts=[f"chunk {i} about the tide and the harbour" for i in range(6)],
        concepts={"tide": [0, 1], "harbour": [2, 3]},
    )
    tiny.communities = {"c0": (0, None)}
    tiny.memberships = [(i, 0, "c0") for i in range(4)]
    return tiny.write_delta(root / "index", embedder)


def append_chunk_run(index: str, embedder: HashEmbedder, run_id: str) -> dict[str, int]:
    """A later run of ``tiny_serving_index``: one more chunk in the chunks table, recorded in a new
    manifest row; the versions that row names."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from lazygraph import tables
    from lazygraph.serving import layout

    root = Path(index)
    extra = TinyIndex(texts=["a new chunk"]).arrow(embedder)[tables.CHUNKS]
    extra = extra.set_column(0, "chunk_id", pa.array([run_id]))
    write_deltalake(str(root / tables.CHUNKS), extra, mode="append")
    versions = {
        name: DeltaTable(str(root / name)).version() for name in layout.SOURCES if (root / name).exists()
    }
    write_manifest(root, versions, run_id=run_id)
    return versions

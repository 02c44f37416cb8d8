"""Questions generated from an index, for a corpus that has no question set of its own.

In the spirit of benchmark-qed's AutoQ, two kinds, sampled from the index snapshot so that they spread
over the whole corpus:

- local questions: one chunk at a time, taken round-robin over the finest-level concept communities
  (so each part of the corpus is asked about); the LLM writes a question that this one passage
  answers, naming its specific entity, and the answer, copied from the passage;
- global questions: a concept community at a time, coarsest levels first, with several of its chunks
  from different documents and its top concepts; the LLM writes a question about the collection as a
  whole (themes, trends, comparisons) that needs many passages.

More candidates than asked for are generated (``oversample``) and filtered: unreadable replies, no
question, questions that lean on "the passage", local answers not found in their passage, global questions
with no word from what their writer was shown (an echo of the instructions), duplicates.
Each candidate is appended to ``<out>.candidates.jsonl`` as soon as it is made, so a stopped run
resumes where it was (the sampling is seeded, so a rerun draws the same samples).

A local question's answer is what the generating model read off its passage (``answer_origin``): good
enough to score other answers against, not a human gold answer. Its source document is its
``supporting_doc_ids``, so ``eval retrieval`` can measure whether a method finds it.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.markup import escape

from lazygraph.errors import ConfigError, InputError, LLMError
from lazygraph.eval import qed
from lazygraph.eval.answers import normalise_answer
from lazygraph.eval.retrieval import progress_bar, write_report
from lazygraph.eval.rows import append_rows, read_row_file, sibling
from lazygraph.jsonlines import iter_json_objects
from lazygraph.llm.base import LLMClient, parse_json_text
from lazygraph.llm.prompts import Prompt, load_prompt, passage_block, quote_passage
from lazygraph.query.snapshot import IndexSnapshot
from lazygraph.settings import Settings
from lazygraph.tables.schemas import UNASSIGNED_COMMUNITY

KINDS = ("local", "global")
QUESTION_PROMPT_VERSIONS = {"local": 1, "global": 2}  # pinned, recorded in the summary
MAX_QUESTION_WORDS = 60
MIN_ANSWER_IN_PASSAGE = 0.6  # share of a local answer's words that its passage must hold
# A question that points at "the passage" means nothing to someone asking the whole index.
_DEICTIC = re.compile(r"\b(th(e|is|ese) (passage|text|excerpt|document|article)s?|the author)\b", re.I)


@dataclass(frozen=True)
class Sample:
    """What one candidate question is written from."""

    key: str  # "local:<chunk id>" or "global:<community id>:<round>"; a rerun skips keys already made
    kind: str
    chunks: tuple[int, ...]
    community: int | None = None


# ---- sampling --------------------------------------------------------------------------------------------
def sample_local(snapshot: IndexSnapshot, n: int, rng: np.random.Generator, min_tokens: int = 40) -> list:
    """``n`` chunks, round-robin over the finest-level communities in random order. Chunks of at least
    ``min_tokens`` tokens are preferred (a few words rarely hold a fact worth asking about)."""
    if n <= 0 or snapshot.n_chunks == 0:
        return []
    long_enough = np.flatnonzero(np.asarray(snapshot.chunk_tokens) >= min_tokens)
    pool = long_enough if len(long_enough) >= n else np.arange(snapshot.n_chunks)
    primary = snapshot.chunk_primary_community[-1] if snapshot.n_levels else np.full(snapshot.n_chunks, -1)
    groups: dict[int, list[int]] = defaultdict(list)
    for chunk in rng.permutation(pool):
        groups[int(primary[chunk])].append(int(chunk))
    order = [groups[g] for g in rng.permutation(sorted(groups))]
    picked = _round_robin(order, n)
    return [Sample(f"local:{snapshot.chunk_ids[c]}", "local", (c,)) for c in picked]


def _round_robin(groups: Sequence[list[int]], n: int) -> list[int]:
    picked: list[int] = []
    depth = 0
    while len(picked) < n and any(depth < len(g) for g in groups):
        picked += [g[depth] for g in groups if depth < len(g)][: n - len(picked)]
        depth += 1
    return picked


def sample_global(
    snapshot: IndexSnapshot, n: int, rng: np.random.Generator, passages: int = 5, min_chunks: int = 3
) -> list[Sample]:
    """``n`` communities (coarsest levels first, random within a level; cycled when there are fewer),
    each with up to ``passages`` of its chunks, from as many documents as it has. Without communities
    spanning two documents, the whole corpus stands in for one."""
    if n <= 0 or snapshot.n_chunks == 0:
        return []
    communities = _global_communities(snapshot, rng, min_chunks)
    samples = []
    for k in range(n):
        community = communities[k % len(communities)] if communities else None
        members = _members(snapshot, community)
        chunks = _spread(snapshot, members, passages, rng)
        name = "corpus" if community is None else str(snapshot.community_ids[community])
        samples.append(Sample(f"global:{name}:{k // max(1, len(communities))}", "global", chunks, community))
    return samples


def _members(snapshot: IndexSnapshot, community: int | None) -> np.ndarray:
    if community is None:
        return np.arange(snapshot.n_chunks)
    m = snapshot.community_chunks
    return m.indices[m.indptr[community] : m.indptr[community + 1]]


def _global_communities(snapshot: IndexSnapshot, rng: np.random.Generator, min_chunks: int) -> list[int]:
    docs = np.asarray([str(snapshot.chunk_doc_ids[i]) for i in range(snapshot.n_chunks)])
    eligible = []
    for c in range(snapshot.n_communities):
        members = _members(snapshot, c)
        if snapshot.community_ids[c] == UNASSIGNED_COMMUNITY or len(members) < min_chunks:
            continue
        if len(set(docs[members])) >= 2:  # a theme of one document is a local question
            eligible.append(c)
    shuffled = [eligible[i] for i in rng.permutation(len(eligible))]
    return sorted(shuffled, key=lambda c: int(snapshot.community_level[c]))  # stable: random in a level


def _spread(snapshot: IndexSnapshot, members: np.ndarray, k: int, rng: np.random.Generator) -> tuple:
    """Up to ``k`` chunks: one per document first, then more of the same documents."""
    first, rest, seen = [], [], set()
    for chunk in rng.permutation(members):
        doc = str(snapshot.chunk_doc_ids[chunk])
        (rest if doc in seen else first).append(int(chunk))
        seen.add(doc)
    return tuple((first + rest)[:k])


# ---- prompts and replies ---------------------------------------------------------------------------------
def question_schema(kind: str) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    if kind == "global":  # naming the topic first keeps a small model from echoing the instructions
        properties["topic"] = {"type": "string", "maxLength": 80}
    properties["question"] = {"type": "string", "maxLength": 300}
    if kind == "local":
        properties["answer"] = {"type": "string", "maxLength": 120}
    return {"type": "object", "properties": properties, "required": list(properties)}


Truncate = Callable[[str, int], str]


def question_messages(
    prompt: Prompt, snapshot: IndexSnapshot, sample: Sample, truncate: Truncate, passage_tokens: int
) -> list[dict[str, str]]:
    if sample.kind == "local":
        text = truncate(snapshot.passage(sample.chunks[0]), 2 * passage_tokens)
        return prompt.messages(passage=quote_passage(text))
    blocks = [
        passage_block(i, truncate(snapshot.passage(c), passage_tokens))
        for i, c in enumerate(sample.chunks, 1)
    ]
    concepts = snapshot.community_top_concepts[sample.community][:8] if sample.community is not None else []
    themes = f" (concepts they share: {', '.join(concepts)})" if concepts else ""
    return prompt.messages(n_passages=str(len(blocks)), themes=themes, passages="\n\n".join(blocks))


def parse_question(text: str) -> dict[str, str]:
    """The question (and answer) of a reply; LLMError when there is none."""
    data = parse_json_text(text)
    if not isinstance(data, dict) or not isinstance(data.get("question"), str):
        raise LLMError(f"the reply holds no question: {text[:200]!r}")
    found = {"question": " ".join(data["question"].split())}
    for field in ("answer", "topic"):
        if isinstance(data.get(field), str):
            found[field] = " ".join(data[field].split())
    return found


def grounded_words(question: str, shown: str, instructions: str) -> int:
    """Content words (4 letters or more) of a question that come from what its writer was shown and
    not from the instructions: 0 for a question that only echoes the prompt (a small model's habit)."""
    words = {w for w in normalise_answer(question).split() if len(w) >= 4}
    return len(words & set(normalise_answer(shown).split()) - set(normalise_answer(instructions).split()))


def answer_in_passage(answer: str, passage: str) -> float:
    """Share of the answer's normalised words that the passage holds (1.0 for an answer copied from it)."""
    words = normalise_answer(answer).split()
    if not words:
        return 0.0
    held = set(normalise_answer(passage).split())
    return sum(w in held for w in words) / len(words)


def generate_candidate(
    client: LLMClient,
    prompts: dict[str, Prompt],
    snapshot: IndexSnapshot,
    sample: Sample,
    truncate: Truncate,
    passage_tokens: int,
) -> dict[str, Any]:
    """One candidate question as a row; an unreadable reply becomes the row's error."""
    row: dict[str, Any] = {
        "key": sample.key,
        "type": sample.kind,
        "source_chunk_ids": [str(snapshot.chunk_ids[c]) for c in sample.chunks],
        "source_doc_ids": list(dict.fromkeys(str(snapshot.chunk_doc_ids[c]) for c in sample.chunks)),
        "community_id": None if sample.community is None else str(snapshot.community_ids[sample.community]),
        "prompt_version": prompts[sample.kind].version,
    }
    messages = question_messages(prompts[sample.kind], snapshot, sample, truncate, passage_tokens)
    try:
        result = client.chat(
            messages, max_tokens=160, temperature=0.0, json_schema=question_schema(sample.kind)
        )
        found = parse_question(result.text)
    except LLMError as exc:
        return {**row, "error": str(exc)}
    if sample.kind == "local":
        found["answer_in_passage"] = round(
            answer_in_passage(found.get("answer", ""), snapshot.passage(sample.chunks[0])), 3
        )
    else:
        prompt = prompts[sample.kind]
        shown = messages[-1]["content"]
        found["grounded_words"] = grounded_words(found["question"], shown, prompt.system + " " + prompt.user)
    return {
        **row,
        **found,
        "error": None,
        "prompt_tokens": result.prompt_tokens,
        "seconds": round(result.seconds, 3),
    }


# ---- filtering and the question rows ---------------------------------------------------------------------
def rejection(candidate: dict[str, Any]) -> str | None:
    """Why a candidate is not kept, or None to keep it."""
    if candidate.get("error"):
        return "unreadable reply"
    question = candidate.get("question", "")
    words = question.split()
    if len(words) < 3 or not question.endswith("?"):
        return "not a question"
    if len(words) > MAX_QUESTION_WORDS:
        return "too long"
    if _DEICTIC.search(question):
        return "refers to its passage"
    if candidate["type"] == "local":
        if not candidate.get("answer"):
            return "no answer"
        if candidate.get("answer_in_passage", 0.0) < MIN_ANSWER_IN_PASSAGE:
            return "answer not in its passage"
    elif candidate.get("grounded_words", 1) == 0:
        return "echoes the instructions"
    return None


def question_row(candidate: dict[str, Any]) -> dict[str, Any]:
    """A kept candidate as a question row of ``eval answers`` / ``compare`` / ``sweep``."""
    base = {
        "question": candidate["question"],
        "type": candidate["type"],
        "source_chunk_ids": candidate["source_chunk_ids"],
        "source_doc_ids": candidate["source_doc_ids"],
    }
    if candidate["type"] == "local":
        return {
            "question_id": f"local-{candidate['source_chunk_ids'][0]}",
            **base,
            "answer": candidate["answer"],
            "answer_origin": "generated from its source passage",
            "supporting_doc_ids": candidate["source_doc_ids"],
        }
    key_round = candidate["key"].rsplit(":", 1)[-1]
    community = candidate.get("community_id") or "corpus"
    return {"question_id": f"global-{community}-{key_round}", **base, "community_id": community}


def select_questions(
    candidates: Sequence[dict[str, Any]], wanted: dict[str, int]
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The first ``wanted[kind]`` acceptable, distinct candidates of each kind, and the rejection counts."""
    chosen: list[dict[str, Any]] = []
    rejected: dict[str, int] = defaultdict(int)
    seen: set[str] = set()
    taken = dict.fromkeys(KINDS, 0)
    for candidate in candidates:
        reason = rejection(candidate)
        text = normalise_answer(candidate.get("question", ""))
        if reason is None and text in seen:
            reason = "duplicate"
        if reason is not None:
            rejected[reason] += 1
            continue
        seen.add(text)
        if taken[candidate["type"]] < wanted[candidate["type"]]:
            taken[candidate["type"]] += 1
            chosen.append(question_row(candidate))
    return chosen, dict(sorted(rejected.items()))


# ---- reading question sets ----------------------------------------------------------------------------
def load_question_set(path: Path, skip: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
    """Questions from JSON Lines (``{"question_id", "question", ...}``) or benchmark-qed's questions
    (.json); ids default to the position, must be unique; ``skip`` first, then at most ``limit``."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"questions file {path} does not exist or is not a file; pass it to --questions")
    if path.suffix.lower() == ".json":
        rows = [(f"{path} item {i}", q) for i, q in enumerate(qed.read_questions(path), start=1)]
    else:
        rows = [(f"{path}:{n}", {"question_id": f"q{n}", **q}) for n, q in iter_json_objects(path)]
    seen: set[str] = set()
    for where, row in rows:
        if not isinstance(row.get("question"), str) or not row["question"].strip():
            raise InputError(f"{where} needs a non-empty question; write it or remove the line")
        row["question_id"] = str(row["question_id"])
        if row["question_id"] in seen:
            raise InputError(f"{where}: question id {row['question_id']} appears twice; give each its own id")
        seen.add(row["question_id"])
    questions = [row for _, row in rows][skip:]
    return questions if limit is None else questions[:limit]


def write_question_files(out_path: Path, questions: Sequence[dict[str, Any]]) -> list[Path]:
    """``out`` with every question, and ``<out>.local.jsonl`` / ``<out>.global.jsonl`` per kind (the
    generated local questions carry answers, so ``eval answers`` takes that file as it is)."""
    written = []
    targets = [(Path(out_path), list(questions))]
    targets += [
        (sibling(out_path, f"{kind}.jsonl"), [q for q in questions if q["type"] == kind]) for kind in KINDS
    ]
    for path, rows in targets:
        if rows or path == Path(out_path):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
            written.append(path)
    return written


# ---- the command ----------------------------------------------------------------------------------------
def _truncator(settings: Settings) -> Truncate:
    import tiktoken

    encoding = tiktoken.get_encoding(settings.chunking.encoding)

    def truncate(text: str, tokens: int) -> str:
        ids = encoding.encode(text, disallowed_special=())
        return text if len(ids) <= tokens else encoding.decode(ids[:tokens]) + " ..."

    return truncate


def plan_samples(
    snapshot: IndexSnapshot, wanted: dict[str, int], oversample: float, seed: int, passages: int
) -> list[Sample]:
    """Every sample to write a candidate from: locals then globals, ``oversample`` times the count."""
    rng = np.random.default_rng(seed)
    n_local = math.ceil(wanted["local"] * oversample)
    n_global = math.ceil(wanted["global"] * oversample)
    return sample_local(snapshot, n_local, rng) + sample_global(snapshot, n_global, rng, passages)


def check_generation(wanted: dict[str, int], oversample: float, passages: int, passage_tokens: int) -> None:
    if any(n < 0 for n in wanted.values()) or not any(wanted.values()):
        raise ConfigError("ask for some questions: --local N and/or --global N, 0 or more, not both 0")
    if oversample < 1:
        raise ConfigError("--oversample takes 1 or more (1.5 writes half as many spare candidates)")
    if passages < 2:
        raise ConfigError("--passages takes 2 or more: a global question needs several passages")
    if passage_tokens < 20:
        raise ConfigError("--passage-tokens takes 20 or more")


def run_candidates(
    client: LLMClient,
    snapshot: IndexSnapshot,
    samples: Sequence[Sample],
    candidates_path: Path,
    console: Console,
    truncate: Truncate,
    passage_tokens: int,
) -> list[dict[str, Any]]:
    """A candidate per sample not yet in ``candidates_path``; return the candidates of ``samples``."""
    prompts = {kind: load_prompt(f"question_{kind}", v) for kind, v in QUESTION_PROMPT_VERSIONS.items()}
    done = {r["key"]: r for r in read_row_file(candidates_path, ("key", "type"), console)}
    done = {
        k: r
        for k, r in done.items()
        if r["type"] in prompts and r.get("prompt_version") == prompts[r["type"]].version
    }
    todo = [s for s in samples if s.key not in done]
    if len(todo) < len(samples):
        console.print(
            f"resuming: {len(samples) - len(todo)} of {len(samples)} candidates already in "
            f"{escape(str(candidates_path))}"
        )
    start = time.perf_counter()
    with progress_bar(console) as progress:
        bar = progress.add_task("questions", total=len(samples), completed=len(samples) - len(todo))
        for n, sample in enumerate(todo, start=1):
            row = generate_candidate(client, prompts, snapshot, sample, truncate, passage_tokens)
            append_rows(candidates_path, [row])
            done[sample.key] = row
            per = (time.perf_counter() - start) / n
            progress.update(bar, advance=1, description=f"questions ({per:.1f} s/candidate)")
    return [done[s.key] for s in samples]


def generate_questions(
    settings: Settings,
    index: str,
    out_path: Path,
    console: Console,
    *,
    n_local: int = 10,
    n_global: int = 10,
    oversample: float = 1.5,
    seed: int = 42,
    role: str = "synthesis",
    passages: int = 5,
    passage_tokens: int = 250,
    qed_dir: Path | None = None,
    client: LLMClient | None = None,
    snapshot: IndexSnapshot | None = None,
) -> dict[str, Any]:
    """The `lazygraph eval questions` command: sample, write candidates (resumable), filter, write."""
    from lazygraph.eval.compare import make_judge
    from lazygraph.query.snapshot import load_snapshot

    wanted = {"local": n_local, "global": n_global}
    check_generation(wanted, oversample, passages, passage_tokens)
    if snapshot is None:
        with console.status(f"loading index {index}"):
            snapshot = load_snapshot(index, settings)
    if snapshot.n_chunks == 0:
        raise InputError(f"the index {index} holds no chunks; index some documents first (lazygraph index)")
    samples = plan_samples(snapshot, wanted, oversample, seed, passages)
    with console.status("loading the language model"):
        client = client or make_judge(settings, role)
    candidates_path = sibling(out_path, "candidates.jsonl")
    candidates = run_candidates(
        client, snapshot, samples, candidates_path, console, _truncator(settings), passage_tokens
    )
    questions, rejected = select_questions(candidates, wanted)
    files = write_question_files(out_path, questions)
    if qed_dir is not None:
        files += qed.write_questions(Path(qed_dir), questions)
    summary = {
        "index": index,
        "asked": wanted,
        "written": {kind: sum(q["type"] == kind for q in questions) for kind in KINDS},
        "candidates": {kind: sum(c["type"] == kind for c in candidates) for kind in KINDS},
        "rejected": rejected,
        "seed": seed,
        "oversample": oversample,
        "model": client.model_id,
        "prompt_versions": dict(QUESTION_PROMPT_VERSIONS),
        "files": [str(p) for p in files],
        "candidates_file": str(candidates_path),
    }
    write_report(sibling(out_path, "summary.json"), summary)
    return summary


def convert_qed_questions(qed_file: Path, out_path: Path) -> dict[str, Any]:
    """benchmark-qed (AutoQ) questions as a lazygraph questions file; no index or model is needed."""
    questions = qed.read_questions(Path(qed_file))
    for question in questions:
        question.setdefault("type", "")
    files = write_question_files(out_path, questions)
    return {"converted": len(questions), "files": [str(p) for p in files]}

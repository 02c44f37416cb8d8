"""Gold-document recall of the two baselines that make no LLM call: vector RAG and hybrid (BM25 +
vector, reciprocal-rank fusion), on every hotpotqa100 question at equal context limits.

    lazygraph bench baselines --index /tmp/hp/index --contexts 1000,2000,8000

Cheap (one embedding and one BM25 pass per question), so it always runs on all questions: it is the
bar lazy search must clear. Prints mean recall overall and per question type.

Two ablations without an LLM sit beside them, because the lazy context quotes *focused* passages
(a chunk's sentences that bear on the question, ``lazygraph.query.focus``) where the baselines quote
whole chunks, and so fits more documents in the same tokens:

- ``hybrid-focused``: the hybrid ranking, each chunk quoted as its focused passage;
- ``prior-focused``: the lazy context's fill alone (``lazygraph.query.search.lazy.fill``) with no
  relevance test, ranked by the relevance rule's no-LLM prior, as a lazy search at budget 0 with no
  claims would be.

What lazy search gains over these is what its LLM work (relevance tests and claims) adds.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

from lazygraph.settings import Settings

REPO = Path(__file__).resolve().parents[2]
DEFAULT_QUESTIONS = REPO.parent / "shared" / "datasets" / "hotpotqa100" / "questions.jsonl"
ABLATIONS = ("hybrid-focused", "prior-focused")


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def measure(
    settings: Settings,
    index: str,
    questions_file: Path,
    contexts: list[int],
    limit: int | None = None,
    rows: list[dict] | None = None,
) -> dict[str, dict[str, dict[int, float]]]:
    """method -> question type ("all", "bridge", ...) -> context limit -> mean recall. Each question's
    recall per method and limit is also appended to ``rows`` when given."""
    from lazygraph.eval.retrieval import baselines, load_questions, recall
    from lazygraph.query.engine import QueryEngine

    engine = QueryEngine.open(settings, index, Console(stderr=True, quiet=True))
    docs = engine.snapshot.chunk_doc_ids
    found: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))  # method, type, limit

    def record(method: str, question: dict, limit: int, chunks: list[int]) -> None:
        doc_ids = dict.fromkeys(str(docs[c]) for c in chunks)
        score = recall(list(doc_ids), question["supporting_doc_ids"])
        if rows is not None:
            row = {"question_id": question["question_id"], "type": question.get("type"), "method": method}
            rows.append({**row, "context_tokens": limit, "recall": score})
        for kind in ("all", question.get("type") or "unknown"):
            found[method][kind][limit].append(score)

    for question in load_questions(questions_file, limit):
        hybrid_scores = None
        for method in baselines():  # every method without relevance tests
            with engine.search(question["question"], method, answering=False) as searched:
                for limit in contexts:
                    record(method, question, limit, searched.context(limit).chunks)
                if method == "hybrid":
                    hybrid_scores = searched.retrieval.scores
        for method, candidates in focused_candidates(engine, question["question"], hybrid_scores).items():
            for limit in contexts:
                record(method, question, limit, focused_context(engine, candidates, limit))
    return {
        m: {k: {limit: sum(v) / len(v) for limit, v in by_limit.items()} for k, by_limit in kinds.items()}
        for m, kinds in found.items()
    }


def focused_candidates(engine, question: str, hybrid_scores) -> dict:  # noqa: ANN001
    """Each ablation's candidates, best first: the hybrid order, and the no-LLM prior's order."""
    import numpy as np

    from lazygraph.query.search.lazy.fill import FillCandidates, rank_fill_candidates
    from lazygraph.query.search.lazy.relevance import RelevanceRule

    qs = engine.settings.query
    vector = engine.encode([question])[0]
    vector = vector / (np.linalg.norm(vector) or 1.0)
    head = np.argsort(-hybrid_scores, kind="stable")[: qs.context_fill_candidates].tolist()
    rule = RelevanceRule(qs, lexical=engine.snapshot.has_lexical)
    prior = rank_fill_candidates(engine.snapshot, question, vector, {}, rule, qs, engine.settings.lexical)
    return {
        "hybrid-focused": FillCandidates(head, [0.0] * len(head), question, vector),
        "prior-focused": prior,
    }


def focused_context(engine, candidates, limit: int) -> list[int]:  # noqa: ANN001
    """The chunks whose focused passages fill ``limit`` tokens, in the candidates' order."""
    from lazygraph.query.search.lazy.fill import fill_context
    from lazygraph.query.search.lazy.reduce import render_evidence

    focus = engine.focus()
    doc_ids = engine.snapshot.chunk_doc_ids

    def render(chunks: list[int]) -> list[str]:
        return focus.passages(chunks, candidates.question_vector, candidates.question)

    kept = fill_context(
        [],
        candidates,
        limit,
        engine.count_tokens,
        render,
        lambda chunk: -1,
        lambda chunk: str(doc_ids[chunk]),  # one passage a document, as the lazy context's fill
        render_evidence,
    )
    return [c.chunks[0] for c in kept]


def main(argv: list[str], settings: Settings) -> int:
    parser = argparse.ArgumentParser(prog="lazygraph bench baselines", description=__doc__.splitlines()[0])
    parser.add_argument("--index", required=True)
    parser.add_argument("--questions", type=Path, default=DEFAULT_QUESTIONS)
    parser.add_argument("--contexts", type=_ints, default=[1000, 2000, 8000])
    parser.add_argument("--limit", type=int, default=None, help="only the first K questions")
    parser.add_argument("--out", type=Path, default=None, help="also write the figures as JSON")
    parser.add_argument(
        "--rows", type=Path, default=None, help="also write each question's recall per method (JSON Lines)"
    )
    args = parser.parse_args(argv)
    rows: list[dict] = []
    figures = measure(settings, args.index, args.questions, args.contexts, args.limit, rows)
    if args.rows:
        args.rows.parent.mkdir(parents=True, exist_ok=True)
        args.rows.write_text("".join(json.dumps(row) + "\n" for row in rows))
    table = Table(title="gold-document recall, all questions")
    table.add_column("method")
    table.add_column("questions")
    for limit in args.contexts:
        table.add_column(f"@{limit // 1000}k" if limit % 1000 == 0 else f"@{limit}", justify="right")
    for method, kinds in figures.items():
        for kind, by_limit in sorted(kinds.items()):
            table.add_row(method, kind, *(f"{by_limit[limit]:.3f}" for limit in args.contexts))
    Console().print(table)
    if args.out:
        args.out.write_text(json.dumps(figures, indent=2))
    return 0

"""The serving store against the in-memory snapshot on real questions with gold answers: for each
question and method, the same query on both sources, sharing one fresh LLM cache (keyed by the
prompt). Prints one JSON object.

    lazygraph bench store-equivalence --index DIR --questions FILE.jsonl --out ROWS.jsonl
        [--first N] [--methods lazy,vector,hybrid] [--budget B] [--context-tokens T] [--contexts-only]

The snapshot answers first, calling the model; the store answers second, so a store query that sends
only prompts the snapshot sent makes no model call at all (``fresh_tokens`` 0) and returns the same
answer. With ``--contexts-only`` each source stops at the context cut: no answer is generated, and the
rows compare what the answer prompt would be made of (the rendered context and its chunks). Equal
contexts give equal answer prompts, which the cache answers alike; vector and hybrid then call no model
at all, so every question of a data set can be compared in minutes.

Per row (``--out``, resumable: a question and method already there is skipped): whether the
answers, contexts and cited chunks are equal, the store's fresh tokens, and each source's gold-document
recall (the share of the question's supporting documents in its context). The summary counts rows
alike and gives each source's mean recall.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from lazygraph.jsonlines import iter_json_objects
from lazygraph.settings import Settings

METHODS = ("lazy", "vector", "hybrid")


def source_settings(settings: Settings, source: str, cache: str) -> Settings:
    """The settings with ``query.index_source`` fixed and the LLM cache at ``cache``."""
    llm_cache = settings.query.llm_cache.model_copy(update={"enabled": True, "location": cache})
    query = settings.query.model_copy(update={"index_source": source, "llm_cache": llm_cache})
    return settings.model_copy(update={"query": query})


def read_rows(path: Path) -> list[dict[str, Any]]:
    return [row for _, row in iter_json_objects(path)] if path.exists() else []


def append_row(path: Path, row: dict[str, Any]) -> None:
    """One row more, written whole before the next query (a killed run resumes after it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(row) + "\n")


def gold_recall(doc_ids: list[str], gold: list[str]) -> float | None:
    return None if not gold else len(set(doc_ids) & set(gold)) / len(set(gold))


def compare(snapshot: Any, store: Any, gold: list[str]) -> dict[str, Any]:
    """One question and method on both sources (``api.Answer`` each)."""
    return {
        "same_answer": store.text == snapshot.text,
        "same_context": store.context_text == snapshot.context_text,
        "same_chunks": store.context_chunk_ids == snapshot.context_chunk_ids,
        "same_subqueries": store.subqueries == snapshot.subqueries,
        "store_index_source": store.to_json().get("index_source"),
        "fresh_tokens": store.cost.prompt_tokens + store.cost.completion_tokens,
        "snapshot_tokens": snapshot.cost.llm_tokens,
        "recall_snapshot": gold_recall(snapshot.context_doc_ids, gold),
        "recall_store": gold_recall(store.context_doc_ids, gold),
    }


def compare_contexts(snapshot: dict[str, Any], store: dict[str, Any], gold: list[str]) -> dict[str, Any]:
    """One question and method on both sources, stopped at the context cut (``searched_context``)."""
    return {
        "answered": False,
        "same_context": store["text"] == snapshot["text"],
        "same_chunks": store["chunk_ids"] == snapshot["chunk_ids"],
        "store_index_source": store["index_source"],
        "fresh_tokens": store["fresh_tokens"],
        "snapshot_tokens": snapshot["fresh_tokens"] + snapshot["cached_tokens"],
        "recall_snapshot": gold_recall(snapshot["doc_ids"], gold),
        "recall_store": gold_recall(store["doc_ids"], gold),
    }


def searched_context(index: Any, question: str, method: str, budget: int | None, tokens: int | None) -> dict:
    """The context a query of ``index`` would answer from (rendered text, chunk and document ids),
    without generating the answer."""
    engine = index.engine(method)
    with engine.search(question, method, budget=budget, context_tokens=tokens, answering=False) as searched:
        context = searched.context(engine.context_limit(searched.plan, searched.recorder))
        records = searched.method.reader.chunk_records(context.chunks)
        cost = searched.recorder.to_json()
        return {
            "fresh_tokens": cost["prompt_tokens"] + cost["completion_tokens"],
            "cached_tokens": cost["llm_cached_tokens"],
            "text": searched.rendered(context),
            "chunk_ids": [record.chunk_id for record in records],
            "doc_ids": list(dict.fromkeys(record.doc_id for record in records)),
            "index_source": engine.index_source,
        }


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == method]
        recall = {
            side: [r[f"recall_{side}"] for r in mine if r[f"recall_{side}"] is not None]
            for side in ("snapshot", "store")
        }
        out[method] = {
            "questions": len(mine),
            "answered": sum(r.get("answered", True) for r in mine),
            "same_answer": sum(r.get("same_answer", False) for r in mine),
            "same_context": sum(r["same_context"] for r in mine),
            "store_fresh_tokens": sum(r.get("fresh_tokens", 0) for r in mine),
            "recall_snapshot": round(sum(recall["snapshot"]) / max(1, len(recall["snapshot"])), 4),
            "recall_store": round(sum(recall["store"]) / max(1, len(recall["store"])), 4),
        }
    return out


def main(argv: list[str], settings: Settings) -> int:
    from lazygraph import api
    from lazygraph.eval.questions import load_question_set

    prog = "lazygraph bench store-equivalence"
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--index", required=True)
    parser.add_argument("--questions", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--first", type=int, default=None)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--budget", type=int, default=None)
    parser.add_argument("--context-tokens", type=int, default=None)
    parser.add_argument(
        "--contexts-only",
        action="store_true",
        help="Stop each query at the context cut and compare contexts; no answer is generated.",
    )
    args = parser.parse_args(argv)
    methods = [m for m in args.methods.split(",") if m]
    questions = load_question_set(args.questions, limit=args.first)
    done = {(r["question_id"], r["method"]) for r in read_rows(args.out)}
    cache = str(args.out.with_suffix("").resolve()) + "-llm-cache"
    indexes = {
        source: api.open_index(args.index, settings=source_settings(settings, source, cache))
        for source in ("snapshot", "store")
    }
    budget, tokens = args.budget, args.context_tokens
    for question in questions:
        for method in methods:
            key = (question["question_id"], method)
            if key in done:
                continue
            gold = question.get("supporting_doc_ids") or []
            row = {"question_id": key[0], "method": method}
            if args.contexts_only:
                contexts = {
                    source: searched_context(index, question["question"], method, budget, tokens)
                    for source, index in indexes.items()
                }
                row |= compare_contexts(contexts["snapshot"], contexts["store"], gold)
            else:
                answers = {
                    source: index.query(
                        question["question"], method=method, budget=budget, context_tokens=tokens
                    )
                    for source, index in indexes.items()
                }
                row |= compare(answers["snapshot"], answers["store"], gold)
            append_row(args.out, row)
    rows = [r for r in read_rows(args.out) if r["method"] in methods]
    print(json.dumps({"index": args.index, "rows": len(rows), "methods": summary(rows)}))
    return 0

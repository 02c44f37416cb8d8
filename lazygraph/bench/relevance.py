"""Relevance tests per minute on real chunks: the assessor as configured against others, side by side.

For each question, the passages a search tests first (the question's most similar chunks, read
through the sentence focus) are scored by every set-up in turn, so all set-ups see the same passages
under the same machine load. A set-up is a relevance prompt version, a focus length
(``query.focus_tokens``) and the focus's lexical weight (``query.focus_lexical_weight``). Reported
per set-up: tests per minute, prompt tokens per test, and how well P(yes) separates the questions'
gold passages from the others (ROC AUC), so a faster set-up that separates worse is seen at once.

    lazygraph bench relevance --index /tmp/hp/index --skip 70 --limit 20 \\
        --setup 2:160:0 --setup current

``--setup V:F:L`` is prompt version V with F focus tokens and lexical weight L (default 0);
``current`` is what the settings say. The LLM cache is turned off here: every test reaches the model.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from lazygraph.settings import Settings

REPO = Path(__file__).resolve().parents[2]
DEFAULT_QUESTIONS = REPO.parent / "shared" / "datasets" / "hotpotqa100" / "questions.jsonl"


@dataclass
class Setup:
    name: str
    prompt_version: int
    focus_tokens: int
    lexical_weight: float
    seconds: float = 0.0
    tests: int = 0
    prompt_tokens: int = 0
    scores: list[float] = field(default_factory=list)
    labels: list[bool] = field(default_factory=list)


def parse_setup(text: str, settings) -> Setup:
    if text == "current":
        q = settings.query
        focus = q.assessor_focus_tokens
        name = f"current (v{q.prompts.relevance}, focus {focus}, lexical {q.focus_lexical_weight})"
        return Setup(name, q.prompts.relevance, focus, q.focus_lexical_weight)
    version, focus, lexical = (text.split(":") + ["0"])[:3]
    return Setup(f"v{version}, focus {focus}, lexical {lexical}", int(version), int(focus), float(lexical))


def main(argv: list[str], settings: Settings) -> int:
    parser = argparse.ArgumentParser(prog="lazygraph bench relevance", description=__doc__.splitlines()[0])
    parser.add_argument("--index", required=True)
    parser.add_argument("--questions", type=Path, default=DEFAULT_QUESTIONS)
    parser.add_argument("--skip", type=int, default=70, help="leave out the first N questions")
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--top", type=int, default=8, help="passages per question")
    parser.add_argument("--setup", action="append", default=None, help="V:F or current (repeatable)")
    args = parser.parse_args(argv)

    from sklearn.metrics import roc_auc_score

    from lazygraph.eval.retrieval import load_questions
    from lazygraph.llm.prompts import load_prompt
    from lazygraph.query.engine import QueryEngine
    from lazygraph.query.focus import SentenceFocus

    console = Console(stderr=True)
    no_cache = settings.query.llm_cache.model_copy(update={"enabled": False})
    settings = settings.model_copy(
        update={"query": settings.query.model_copy(update={"llm_cache": no_cache})}
    )
    setups = [parse_setup(s, settings) for s in (args.setup or ["2:160:0", "current"])]
    engine = QueryEngine.open(settings, args.index, console=console)
    client = engine.roles(engine.plan().synthesis_role).relevance
    questions = load_questions(args.questions, args.skip + args.limit)[args.skip :]
    docs = np.asarray(engine.snapshot.chunk_doc_ids).astype(str)
    base = engine.focus()
    focuses = {
        (s.focus_tokens, s.lexical_weight): SentenceFocus(
            engine.snapshot, base.encode, base.count_tokens, s.focus_tokens, s.lexical_weight
        )
        for s in setups
    }
    client.relevance("warm-up", ["the model is loaded and its first call is not timed"])
    for number, question in enumerate(questions, start=1):
        vector = engine.encode([question["question"]])[0]
        chunks = [
            int(c) for c in np.argsort(-engine.snapshot.similarities(vector), kind="stable")[: args.top]
        ]
        gold = set(question["supporting_doc_ids"])
        for setup in setups:
            focus = focuses[(setup.focus_tokens, setup.lexical_weight)]
            passages = focus.passages(chunks, vector, question["question"])
            with client.ledger() as ledger:
                start = time.perf_counter()
                scores = client.relevance(
                    question["question"], passages, prompt=load_prompt("relevance", setup.prompt_version)
                )
                setup.seconds += time.perf_counter() - start
            setup.tests += len(passages)
            setup.prompt_tokens += int(ledger.totals()["prompt_tokens"])
            setup.scores += scores
            setup.labels += [docs[c] in gold for c in chunks]
        console.print(f"question {number}/{len(questions)} scored by {len(setups)} set-ups")

    table = Table(title=f"relevance tests on real chunks ({len(questions)} questions x {args.top} passages)")
    for column in ("set-up", "tests/min", "vs first", "prompt tokens/test", "ROC AUC"):
        table.add_column(column, justify="right")
    first_rate = 60 * setups[0].tests / setups[0].seconds
    for setup in setups:
        rate = 60 * setup.tests / setup.seconds
        auc = (
            roc_auc_score(setup.labels, setup.scores)
            if 0 < sum(setup.labels) < len(setup.labels)
            else float("nan")
        )
        table.add_row(
            setup.name,
            f"{rate:.1f}",
            f"{rate / first_rate:.2f}x",
            f"{setup.prompt_tokens / setup.tests:.0f}",
            f"{auc:.3f}",
        )
    Console(width=140).print(table)
    return 0

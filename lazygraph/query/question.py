"""Checks on a question before any model is loaded or called.

Every LLM call spends time and budget, so a question that cannot lead to an answer is refused up
front, in one line that says why: an empty one, and one too long for the window of a model the query
would send it to (the refine and relevance prompts quote the question whole, so it must fit in each
with the prompt's own text).
"""

from __future__ import annotations

from collections.abc import Callable

from lazygraph.errors import InputError
from lazygraph.query.search import SEARCHES, Plan
from lazygraph.settings import Settings

# Tokens of the answer prompts' fixed text (instructions, question) kept free in the model's window.
PROMPT_OVERHEAD_TOKENS = 200


def require_question(question: str) -> None:
    """Refuse an empty or whitespace-only question (cheap: no index, tokenizer or model needed)."""
    if not question.strip():
        raise InputError('the question is empty; ask one, e.g. lazygraph query "Who founded the company?"')


def question_windows(settings: Settings, plan: Plan) -> dict[str, int]:
    """The context window (n_ctx) of every model the plan sends the question to, by setting name."""
    windows = {}
    if SEARCHES[plan.method].calls_models:  # relevance tests quote the question
        windows["llm.relevance"] = settings.llm.relevance.n_ctx
    if plan.synthesis_role == "relevance":  # refine, map and the answer quote it too
        windows["llm.relevance"] = settings.llm.relevance.n_ctx
    else:
        windows["llm.synthesis"] = settings.llm.synthesis.n_ctx
    return windows


def validate_question(
    question: str, settings: Settings, plan: Plan, count_tokens: Callable[[str], int]
) -> None:
    """Refuse an empty question, or one that cannot fit in a prompt of a model the plan uses."""
    require_question(question)
    name, window = min(question_windows(settings, plan).items(), key=lambda item: item[1])
    limit = window - PROMPT_OVERHEAD_TOKENS
    tokens = count_tokens(question)
    if tokens > limit:
        raise InputError(
            f"the question is {tokens:,} tokens long; at most {limit:,} fit in a prompt of {name} "
            f"(n_ctx {window:,} less {PROMPT_OVERHEAD_TOKENS} for the prompt's own text): shorten it"
        )

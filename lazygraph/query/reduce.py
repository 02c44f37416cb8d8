"""Reduce: the answer to the expanded query from the mapped claims, with citations of source chunks.

The model cites facts by their short labels ([S1], [S2, S5]); the labels are then rewritten to the
contract's ``[Data: Sources (chunk ids)]``. When nothing relevant was found no model is called: the
answer says so plainly.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from lazygraph.llm.base import LLMClient
from lazygraph.llm.prompts import load_prompt
from lazygraph.query.map import Claim, render_claim

_CITATION = re.compile(r"\[\s*((?:S\s*\d+\s*[,;]?\s*)+)\]", re.IGNORECASE)
_LABEL = re.compile(r"S\s*(\d+)", re.IGNORECASE)


def nothing_found_answer(relevance_tests: int, communities: int) -> str:
    return (
        "No relevant information was found in the index for this question "
        f"({relevance_tests} relevance tests over {communities} communities found no relevant text), "
        "so no answer is given."
    )


def format_citations(answer: str, sources: Sequence[Sequence[str]]) -> str:
    """Rewrite [S1, S3] into [Data: Sources (ids)]; labels that name no fact are dropped.

    When the model cited nothing at all, the facts it was given are cited once at the end, so that a
    reader can still check the answer against its sources.
    """

    def replace(match: re.Match[str]) -> str:
        ids: list[str] = []
        for label in _LABEL.findall(match.group(1)):
            n = int(label)
            if 1 <= n <= len(sources):
                ids.extend(sources[n - 1])
        ids = list(dict.fromkeys(ids))
        return f"[Data: Sources ({', '.join(ids)})]" if ids else ""

    text, cited = _CITATION.subn(replace, answer.strip())
    if cited == 0 and sources:
        all_ids = list(dict.fromkeys(i for group in sources for i in group))
        text = f"{text} [Data: Sources ({', '.join(all_ids)})]"
    return re.sub(r"[ \t]+([.,;])", r"\1", text).strip()


def reduce_answer(
    question: str, claims: list[Claim], chunk_ids: Sequence[str], client: LLMClient, max_tokens: int
) -> str:
    """One answer call over the numbered claims; citations rewritten to chunk ids."""
    prompt = load_prompt("reduce")
    rendered = "\n".join(render_claim(n, c) for n, c in enumerate(claims, start=1))
    result = client.chat(prompt.messages(claims=rendered, question=question), max_tokens=max_tokens)
    sources = [[str(chunk_ids[ch]) for ch in c.chunks] for c in claims]
    return format_citations(result.text, sources)

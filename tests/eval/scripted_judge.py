"""A scripted LLM judge for the comparison tests: its verdicts come from a function of the question,
the answers in the order shown and the judgement id, so every figure of a report can be computed by hand."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from lazygraph.llm.base import ChatResult, LLMClient

# (question, answer shown first, answer shown second, judgement id) -> {criterion: "1" | "2" | "tie"}
Script = Callable[[str, str, str, str], dict[str, str]]


def shown(user: str) -> tuple[str, str, str, str]:
    """Question, first answer, second answer and judgement id of a rendered judge prompt."""
    question = re.search(r"^Question: (.*)$", user, re.M).group(1)
    first = re.search(r'<passage id="1">\n(.*?)\n</passage>', user, re.S).group(1)
    second = re.search(r'<passage id="2">\n(.*?)\n</passage>', user, re.S).group(1)
    judgement = re.search(r"\(Judgement (\w+)\.\)", user).group(1)
    return question, first, second, judgement


@dataclass
class ScriptedJudge(LLMClient):
    script: Script = lambda q, first, second, j: {}
    raw_reply: Callable[[int], str | None] = lambda n: None  # a reply to send as it is, by call number
    stop_at: int | None = None  # raise KeyboardInterrupt (a user's Ctrl-C) at this call number
    calls: list[tuple[str, str, str, str]] = field(default_factory=list)
    schemas: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        LLMClient.__init__(self, "synthesis")
        self.model_id = "fake:judge"

    def _chat(self, messages, *, max_tokens, temperature, json_schema) -> ChatResult:
        if self.stop_at is not None and len(self.calls) + 1 == self.stop_at:
            raise KeyboardInterrupt
        seen = shown(messages[-1]["content"])
        self.calls.append(seen)
        self.schemas.append(json_schema)
        raw = self.raw_reply(len(self.calls))
        if raw is None:
            verdicts = self.script(*seen)
            raw = json.dumps({c: {"reason": "scripted", "winner": w} for c, w in verdicts.items()})
        return ChatResult(text=raw, prompt_tokens=100, completion_tokens=20, seconds=0.01)

    def _relevance(self, messages_per_passage):
        raise AssertionError("a judge makes no relevance tests")

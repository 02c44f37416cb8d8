"""Prompt files, one per LLM task, versioned in the file name (``<task>.v<N>.md``).

A file has a ``## system`` section and a ``## user`` section; the user section is a
``str.format`` template. ``load_prompt`` returns the newest version unless one is named.

Document text reaches a prompt only between passage tags (``<passage id="3">`` ... ``</passage>``),
and the prompts say that text inside them is data, never instructions. ``quote_passage`` neutralises
tag look-alikes inside the text, so a document cannot close its own passage and pose as the question
or the instructions around it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from lazygraph.errors import ConfigError

PROMPTS_DIR = Path(__file__).parent
# "<passage", "</passage", "< / PASSAGE" ...: anything a model could read as opening or closing a passage.
_PASSAGE_TAG = re.compile(r"<(\s*/?\s*passage)", re.IGNORECASE)
# The brackets of chat-control tokens: <|im_start|>, <|eot_id|>, <｜User｜> ...
_CONTROL_OPEN = re.compile(r"<([|｜])")
_CONTROL_CLOSE = re.compile(r"([|｜])>")


@dataclass(frozen=True)
class Prompt:
    task: str
    version: int
    system: str
    user: str

    def messages(self, **values: str) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": self.system},
            {"role": "user", "content": self.user.format(**values)},
        ]


@cache
def load_prompt(task: str, version: int | None = None) -> Prompt:
    candidates = {}
    for path in PROMPTS_DIR.glob(f"{task}.v*.md"):
        m = re.fullmatch(rf"{re.escape(task)}\.v(\d+)\.md", path.name)
        if m:
            candidates[int(m.group(1))] = path
    if not candidates:
        raise ConfigError(f"no prompt file for task {task!r} in {PROMPTS_DIR}")
    chosen = version if version is not None else max(candidates)
    if chosen not in candidates:
        raise ConfigError(f"prompt {task!r} has no version {chosen}; available: {sorted(candidates)}")
    text = candidates[chosen].read_text()
    sections = dict(re.findall(r"^## (system|user)\n(.*?)(?=^## |\Z)", text, flags=re.S | re.M))
    if "system" not in sections or "user" not in sections:
        raise ConfigError(f"{candidates[chosen]} must have '## system' and '## user' sections")
    return Prompt(task, chosen, sections["system"].strip(), sections["user"].strip())


def quote_passage(text: str) -> str:
    """Document text made safe to quote between passage tags.

    A passage tag inside the text becomes ``‹passage`` / ``‹/passage``: still readable, but no longer a
    tag, so the document's words stay inside the passage they came from. Chat-control look-alikes
    (``<|im_end|>``) become ``‹|im_end|›``: a server that tokenizes the rendered chat with special tokens
    (vLLM, llama.cpp's server) would otherwise end the user's turn there, and even as plain text they
    sway a small model toward the reply that follows them.
    """
    text = _PASSAGE_TAG.sub(r"‹\1", text)
    return _CONTROL_CLOSE.sub(r"\1›", _CONTROL_OPEN.sub(r"‹\1", text))


def passage_block(label: str | int, text: str) -> str:
    """One labelled passage inside its tags, for prompts that quote several (the label is what gets cited)."""
    return f'<passage id="{label}">\n{quote_passage(text)}\n</passage>'

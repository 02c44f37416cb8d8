"""Prompt files, one per LLM task, versioned in the file name (``<task>.v<N>.md``).

A file has a ``## system`` section and a ``## user`` section; the user section is a
``str.format`` template. ``load_prompt`` returns the newest version unless one is named.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from lazygraph.errors import ConfigError

PROMPTS_DIR = Path(__file__).parent


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

"""The LLM layer: one interface (lazygraph.llm.base.LLMClient), three real backends."""

from __future__ import annotations

from lazygraph.llm.base import ChatResult, LLMClient, UsageLedger
from lazygraph.llm.factory import LLMRoles, make_client, make_roles
from lazygraph.llm.prompts import Prompt, load_prompt

__all__ = [
    "ChatResult",
    "LLMClient",
    "LLMRoles",
    "Prompt",
    "UsageLedger",
    "load_prompt",
    "make_client",
    "make_roles",
]

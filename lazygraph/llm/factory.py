"""Build LLM clients from settings, one per role."""

from __future__ import annotations

from dataclasses import dataclass

from lazygraph.llm.base import LLMClient
from lazygraph.settings import LLMBackendSettings, Settings

# Clients installed for a role replace the ones built from settings, in this process only: Ray query
# actors install one that forwards relevance tests to the shared GPU actor (lazygraph.serve.gpu).
_installed_clients: dict[str, LLMClient] = {}


def install_client(role: str, client: LLMClient | None) -> None:
    """Make ``make_client(role, ...)`` return ``client`` from now on (None removes it)."""
    if client is None:
        _installed_clients.pop(role, None)
    else:
        _installed_clients[role] = client


def make_client(role: str, cfg: LLMBackendSettings, settings: Settings) -> LLMClient:
    if role in _installed_clients:
        return _installed_clients[role]
    if cfg.backend == "llamacpp":
        from lazygraph.llm.llamacpp_backend import LlamaCppClient
        from lazygraph.llm.model_file import EMBEDDED_MODEL

        default_model = None
        if cfg.model_path is None:
            from lazygraph.llm.model_file import ensure_model_file

            default_model = ensure_model_file(settings.models_dir, EMBEDDED_MODEL)
        return LlamaCppClient(role, cfg, default_model)
    if cfg.backend == "openai":
        from lazygraph.llm.openai_backend import OpenAICompatibleClient

        return OpenAICompatibleClient(role, cfg)
    from lazygraph.llm.vllm_backend import VLLMClient

    return VLLMClient(role, cfg)


@dataclass
class LLMRoles:
    """The clients a query uses: the cheap relevance tester and the refine/map/reduce model."""

    relevance: LLMClient
    synthesis: LLMClient


def make_roles(settings: Settings, synthesis_role: str = "synthesis") -> LLMRoles:
    """``synthesis_role="relevance"`` (the *_Lite presets) uses the cheap model for everything."""
    relevance = make_client("relevance", settings.llm.relevance, settings)
    if synthesis_role == "relevance":
        return LLMRoles(relevance=relevance, synthesis=relevance)
    return LLMRoles(relevance=relevance, synthesis=make_client("synthesis", settings.llm.synthesis, settings))

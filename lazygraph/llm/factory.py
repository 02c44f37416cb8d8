"""Build LLM clients from settings, one per role."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lazygraph.llm.base import LLMClient
from lazygraph.settings import LLMBackendSettings, Settings

ClientSource = Callable[[str], LLMClient]  # role name -> its client


def make_client(role: str, cfg: LLMBackendSettings, settings: Settings) -> LLMClient:
    return identify(_backend_client(role, cfg, settings), cfg, settings)


def identify(client: LLMClient, cfg: LLMBackendSettings, settings: Settings) -> LLMClient:
    """Give ``client`` what its cache keys name: the model (``model_id``) and the pinned relevance prompt
    version. Every client that may be handed a cache goes through here, whatever process runs its model
    (``make_client``, and ``lazygraph.llm.remote`` for a model in the shared LLM actor)."""
    client.relevance_prompt_version = settings.query.prompts.relevance
    client.model_id = model_id(cfg)
    return client


def model_id(cfg: LLMBackendSettings) -> str:
    """How cache keys name a role's model: the backend, the model file or served model, and for a
    server its endpoint (two servers may serve different weights under one model name)."""
    if cfg.backend == "llamacpp":
        from lazygraph.llm.model_file import EMBEDDED_MODEL

        name = cfg.model_path.name if cfg.model_path is not None else EMBEDDED_MODEL.file_name
        return f"llamacpp:{name}"
    if cfg.backend == "vllm":
        return f"vllm:{cfg.model_path or cfg.model}"
    return f"{cfg.backend}:{cfg.model}@{(cfg.base_url or '').rstrip('/')}"


def _backend_client(role: str, cfg: LLMBackendSettings, settings: Settings) -> LLMClient:
    """A new client of ``cfg``'s backend on every call.

    Nothing process-wide can stand in for it: a process that needs another client (a Ray query actor
    whose model runs in the LLM actor) builds it and hands it to the query engine (``roles=``).
    """
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


def make_roles(
    settings: Settings, synthesis_role: str = "synthesis", client: ClientSource | None = None
) -> LLMRoles:
    """``synthesis_role="relevance"`` (the *_Lite presets) uses the cheap model for everything.

    ``client`` gives each role's client (default: a new one built from the role's settings).
    """
    build = client or (lambda role: make_client(role, getattr(settings.llm, role), settings))
    relevance = build("relevance")
    if synthesis_role == "relevance":
        return LLMRoles(relevance=relevance, synthesis=relevance)
    return LLMRoles(relevance=relevance, synthesis=build("synthesis"))

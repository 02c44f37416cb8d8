"""LLM API keys are secrets: masked wherever settings are shown or recorded, sent only to the server."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from lazygraph.cli import app
from lazygraph.llm.openai_backend import OpenAICompatibleClient
from lazygraph.settings import LLMBackendSettings, load_settings

KEY = "sk-known-relevance-key-4711"
SYNTHESIS_KEY = "sk-known-synthesis-key-0815"


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("LAZYGRAPH_") and name != "LAZYGRAPH_HOME":
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LAZYGRAPH_LLM__RELEVANCE__API_KEY", KEY)
    monkeypatch.setenv("LAZYGRAPH_LLM__SYNTHESIS__API_KEY", SYNTHESIS_KEY)


def test_config_show_masks_llm_keys() -> None:
    runner = CliRunner()
    for args in (["config", "show"], ["config", "show", "--json"]):
        shown = runner.invoke(app, args)
        assert shown.exit_code == 0, shown.output
        assert KEY not in shown.output and SYNTHESIS_KEY not in shown.output, " ".join(args)
        assert "api_key" in shown.output and "**********" in shown.output


def test_recorded_and_logged_forms_of_the_settings_mask_llm_keys() -> None:
    settings = load_settings()
    recorded = settings.model_dump_json()  # the manifest's settings_json
    assert KEY not in recorded and SYNTHESIS_KEY not in recorded
    assert KEY not in repr(settings) and KEY not in str(settings.llm.relevance)
    assert settings.llm.relevance.api_key.get_secret_value() == KEY


def test_the_openai_client_is_given_the_key_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    import openai

    given: dict = {}

    class Recording:
        def __init__(self, **kwargs) -> None:
            given.update(kwargs)

    monkeypatch.setattr(openai, "OpenAI", Recording)
    cfg = LLMBackendSettings(backend="openai", base_url="http://llm:8000/v1", api_key=KEY)
    OpenAICompatibleClient("relevance", cfg)
    assert given["api_key"] == KEY

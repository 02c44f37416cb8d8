"""The openai backend against a real OpenAI-compatible server: llama.cpp's, serving the embedded model."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from lazygraph.llm.model_file import EMBEDDED_MODEL, ensure_model_file
from lazygraph.llm.openai_backend import OpenAICompatibleClient
from lazygraph.settings import LLMBackendSettings

pytestmark = pytest.mark.e2e


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server_url(settings, tmp_path_factory):
    pytest.importorskip("llama_cpp.server.app", reason="llama-cpp-python[server] is not installed")
    model = ensure_model_file(settings.models_dir, EMBEDDED_MODEL)
    port = _free_port()
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "2048",
        "--n_threads",
        "2",
        "--logits_all",
        "true",
    ]
    # The server logs a lot: send it to a file, since an unread pipe would fill and block it.
    log_path = tmp_path_factory.mktemp("llama-server") / "server.log"
    log = log_path.open("wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(url + "/models", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError(
                        "llama.cpp server did not start: " + log_path.read_text()[-2000:]
                    ) from None
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def test_chat_schema_and_logprob_relevance_over_http(server_url: str) -> None:
    cfg = LLMBackendSettings(
        backend="openai",
        base_url=server_url,
        model="embedded",
        json_dialect="json_object_schema",
        max_concurrency=2,
        timeout_s=120,
    )
    client = OpenAICompatibleClient("relevance", cfg)
    with client.ledger() as ledger:
        reply = client.chat(
            [{"role": "user", "content": "Name the capital of Italy in one word."}], max_tokens=6
        )
        schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
        structured = client.chat(
            [{"role": "user", "content": "Which city is the capital of Japan? JSON."}],
            max_tokens=30,
            json_schema=schema,
        )
        p_rel, p_irr = client.relevance(
            "Which river flows through Rome?",
            [
                "The Tiber flows through the centre of Rome.",
                "Penguins live mostly in the Southern Hemisphere.",
            ],
        )
    assert "rome" in reply.text.lower()
    assert "tokyo" in json.loads(structured.text)["city"].lower()
    assert p_rel > 0.5 > p_irr
    totals = ledger.totals()
    assert totals["llm_calls"] == 4 and totals["prompt_tokens"] > 0

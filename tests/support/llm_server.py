"""Starting the fake vLLM-shaped server (``fake_llm_server.py``) as a real process for a test or benchmark."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SERVER = Path(__file__).with_name("fake_llm_server.py")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class FakeServer:
    url: str  # the /v1 base URL
    port: int
    process: subprocess.Popen
    log: Path

    def requests(self) -> list[dict[str, Any]]:
        """Every chat request the server received, as logged (one JSON object a line)."""
        return [entry for entry in self._logged() if entry.get("kind") != "probe"]

    def probes(self) -> list[dict[str, Any]]:
        """Every health probe (``GET /v1/models``) the server received."""
        return [entry for entry in self._logged() if entry.get("kind") == "probe"]

    def _logged(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]

    def stats(self) -> dict[str, int]:
        with urllib.request.urlopen(self.url.removesuffix("/v1") + "/stats", timeout=5) as answer:
            return json.loads(answer.read())


@contextmanager
def fake_llm_server(folder: Path, port: int | None = None, **options: Any) -> Iterator[FakeServer]:
    """A running server; ``options`` are its command-line options (``outage_after=20`` ...). ``port``: the
    one it listens on (default: a free one); a server started again on the same port is the same endpoint
    to the clients (and to their LLM cache keys), as a restarted vLLM is."""
    port = port or free_port()
    log = folder / f"fake-llm-{port}.jsonl"
    command = [sys.executable, str(SERVER), "--port", str(port), "--log", str(log)]
    for name, value in options.items():
        if value is not None:
            command += [f"--{name.replace('_', '-')}", str(value)]
    output = (folder / f"fake-llm-{port}.out").open("w")
    process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url + "/models", timeout=2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        "the fake LLM server did not start: " + (folder / f"fake-llm-{port}.out").read_text()
                    ) from None
                time.sleep(0.2)
        yield FakeServer(url, port, process, log)
    finally:
        process.terminate()
        process.wait(timeout=20)
        output.close()

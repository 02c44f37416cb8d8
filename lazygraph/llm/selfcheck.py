"""Run the embedded model once on a long prompt: proof that the compiled llama.cpp runs on this CPU.

``python -m lazygraph.llm.selfcheck`` is what the bootstrap runs, in a child process, right after
building llama.cpp. A build whose compiler flags name instructions the machine does not execute
loads fine and answers a one-token prompt, then dies with SIGILL on the first prompt long enough
to reach the matrix kernels; so the check evaluates a relevance prompt of well over 256 tokens and
generates a few tokens. The exit status tells the bootstrap whether to rebuild with safer flags.
"""

from __future__ import annotations

import sys
import time

from lazygraph.errors import LazyGraphError

# A passage long enough (~330 tokens with the prompt) to run the batched matrix kernels.
_PASSAGE = " ".join(
    f"In survey year {2000 + i}, the harbour authority of Kesteven Bay counted {40 + 3 * i} fishing boats, "
    f"dredged the northern channel by {i % 4 + 1} metres and recorded {12 - i % 5} hectares of salt marsh."
    for i in range(10)
)
MIN_PROMPT_TOKENS = 256


def run_selfcheck() -> str:
    """Evaluate one long relevance prompt and one short generation; return a one-line report."""
    from lazygraph.llm.factory import make_client
    from lazygraph.settings import get_settings

    settings = get_settings()
    client = make_client("relevance", settings.llm.relevance, settings)
    start = time.perf_counter()
    p_yes = client.relevance("How many fishing boats did Kesteven Bay count in 2004?", [_PASSAGE])[0]
    prompt_tokens = client.usage.calls[-1].prompt_tokens
    if prompt_tokens < MIN_PROMPT_TOKENS:
        raise AssertionError(f"the check prompt has {prompt_tokens} tokens, fewer than {MIN_PROMPT_TOKENS}")
    reply = client.chat([{"role": "user", "content": "Count from one to ten in words."}], max_tokens=16)
    seconds = time.perf_counter() - start
    return (
        f"llama.cpp self-check passed: {prompt_tokens}-token relevance prompt (P(yes) = {p_yes:.2f}) "
        f"and {reply.completion_tokens} generated tokens in {seconds:.1f} s"
    )


def main() -> int:
    try:
        print(run_selfcheck(), flush=True)
    except LazyGraphError as exc:
        print(f"llama.cpp self-check could not run: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

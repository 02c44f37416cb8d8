"""A fake OpenAI-compatible LLM server shaped like vLLM's (`vllm serve`), run as a process of its own.

No vLLM can run on the test machines, so this server answers `/v1/chat/completions` and `/v1/models` the
way vLLM's OpenAI server documents them, and refuses requests vLLM would refuse:

- structured output as ``response_format={"type": "json_schema", "json_schema": {"name", "schema",
  "strict"}}``; the reply always validates against the schema (vLLM's guided decoding guarantees it);
  ``json_object`` and vLLM's older ``guided_json`` (extra body) are accepted too;
- log-probabilities as ``choices[0].logprobs.content[i] = {token, logprob, bytes, top_logprobs: [{token,
  logprob, bytes}, ...]}``; ``top_logprobs`` needs ``logprobs: true`` and may not exceed 20 (vLLM's
  default ``--max-logprobs``); a token outside the top ones has logprob -9999.0;
- errors as ``{"error": {"message", "type", "param", "code"}}`` with the HTTP status; an unknown model is
  404, a missing or wrong ``Authorization: Bearer`` key is 401 when ``--api-key`` is given.

Replies are deterministic: a relevance test (the relevance prompt) answers P(yes) = 0.8 when the passage
shares at least two words of four letters or more with the question, else 0.1; other prompts get the
canned replies of ``support.fakes.FakeLLM``, or the smallest instance of the schema asked for.

Faults for the reliability tests: ``--outage-after N --outage-seconds S`` answers 503 to every request
for S seconds once N chat requests have been answered (``--outage-status`` for another code), and
``--latency-s`` delays every answer, as a busy GPU would. ``--log FILE`` appends one JSON line per
request (time, status, kind, model, and the question of relevance tests; a client's health probe of
``/v1/models`` has kind "probe"); ``GET /stats`` gives counts.

    python tests/support/fake_llm_server.py --port 8001 --model served-model [--api-key KEY]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for support.fakes

MAX_LOGPROBS = 20
UNLIKELY = -9999.0
_WORD = re.compile(r"[a-z0-9]{4,}")


class ServerState:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.lock = threading.Lock()
        self.answered = 0
        self.refused_outage = 0
        self.outage_until: float | None = None
        self.outages = 0
        self.log = open(args.log, "a") if args.log else None  # noqa: SIM115 - open for the server's life

    def outage(self) -> bool:
        """Whether this request falls in the outage (which starts after ``outage_after`` answers)."""
        with self.lock:
            now = time.monotonic()
            after = self.args.outage_after
            if self.outages == 0 and after is not None and self.answered >= after:
                self.outage_until = now + self.args.outage_seconds
                self.outages += 1
            if self.outage_until is not None and now < self.outage_until:
                self.refused_outage += 1
                return True
            return False

    def record(self, entry: dict[str, Any]) -> None:
        with self.lock:
            if entry.get("status") == 200 and entry.get("kind") != "probe":
                self.answered += 1
            if self.log is not None:
                self.log.write(json.dumps(entry) + "\n")
                self.log.flush()


class BadRequest(Exception):
    def __init__(self, status: int, message: str, kind: str = "BadRequestError") -> None:
        super().__init__(message)
        self.status, self.kind = status, kind


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def _task(messages: list[dict[str, Any]]) -> str:
    from support.fakes import _task as fake_task

    try:
        return fake_task(messages)
    except (IndexError, KeyError, TypeError):
        return "unknown"


def relevance_p_yes(user: str) -> float:
    question = user.split("Question: ", 1)[1].split("\n", 1)[0] if "Question: " in user else user
    passage = user.split("<passage>", 1)[1].split("</passage>", 1)[0] if "<passage>" in user else user
    return 0.8 if len(_words(question) & _words(passage)) >= 2 else 0.1


def minimal_instance(schema: dict[str, Any]) -> Any:
    """The smallest value a JSON schema accepts (enough for the schemas lazygraph sends)."""
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return minimal_instance(schema[key][0])
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = kind[0]
    if kind == "object":
        props = schema.get("properties", {})
        return {name: minimal_instance(props.get(name, {})) for name in schema.get("required", list(props))}
    if kind == "array":
        return [minimal_instance(schema.get("items", {})) for _ in range(schema.get("minItems", 0))]
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return "x" * max(1, schema.get("minLength", 1))


def reply_text(messages: list[dict[str, Any]], schema: dict[str, Any] | None) -> str:
    """The canned reply of ``FakeLLM`` for the prompt's task, or the schema's smallest instance."""
    import jsonschema  # noqa: I001 - support comes from the tests folder put on the path above
    from support.fakes import FakeLLM

    text = FakeLLM()._chat(messages, max_tokens=512, temperature=0.0, json_schema=schema).text
    if schema is None:
        return text
    try:
        jsonschema.validate(json.loads(text), schema)
        return text
    except (ValueError, jsonschema.ValidationError):
        return json.dumps(minimal_instance(schema))


def structured_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema a request constrains its reply to, validated as vLLM validates it."""
    guided = body.get("guided_json")
    if guided is not None:
        return guided if isinstance(guided, dict) else json.loads(guided)
    fmt = body.get("response_format")
    if fmt is None:
        return None
    kind = fmt.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return fmt.get("schema") or {"type": "object"}
    if kind == "json_schema":
        spec = fmt.get("json_schema")
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            raise BadRequest(400, "response_format json_schema needs a json_schema object with a name")
        schema = spec.get("schema")
        if not isinstance(schema, dict):
            raise BadRequest(400, "response_format json_schema needs json_schema.schema")
        return schema
    raise BadRequest(400, f"unknown response_format type {kind!r}")


def _token(text: str, logprob: float) -> dict[str, Any]:
    return {"token": text, "logprob": logprob, "bytes": list(text.encode())}


def completion(body: dict[str, Any], served: str) -> tuple[dict[str, Any], str]:
    """The chat completion for a request, and what kind of request it was."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest(400, "messages must be a non-empty list")
    for message in messages:
        if (
            not isinstance(message, dict)
            or "role" not in message
            or not isinstance(message.get("content"), str)
        ):
            raise BadRequest(400, "each message needs a role and string content")
    top = body.get("top_logprobs")
    wants_logprobs = bool(body.get("logprobs"))
    if top is not None:
        if not wants_logprobs:
            raise BadRequest(400, "when using `top_logprobs`, `logprobs` must be set to true")
        if not isinstance(top, int) or top < 0 or top > MAX_LOGPROBS:
            raise BadRequest(400, f"top_logprobs must be between 0 and {MAX_LOGPROBS}")
    max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
    schema = structured_schema(body)
    user = messages[-1]["content"]
    kind = _task(messages)
    logprobs = None
    if kind == "relevance" and max_tokens == 1:
        p = relevance_p_yes(user)
        candidates = [
            ("Yes", math.log(p)),
            ("No", math.log(1 - p)),
            ("Maybe", math.log(1e-4)),
            ("The", UNLIKELY),
        ]
        candidates.sort(key=lambda c: -c[1])
        chosen = candidates[0]
        logprobs = {
            "content": [
                {**_token(*chosen), "top_logprobs": [_token(t, lp) for t, lp in candidates[: top or 0]]}
            ]
        }
        text, finish = chosen[0], "length"
        completion_tokens = 1
    else:
        text = reply_text(messages, schema)
        completion_tokens = max(1, len(text) // 4)
        finish = "stop"
        if not wants_logprobs:
            logprobs = None
    prompt_tokens = sum(len(m["content"]) for m in messages) // 4 + 8
    answer = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": served,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": text,
                    "tool_calls": [],
                    "reasoning_content": None,
                },
                "logprobs": logprobs,
                "finish_reason": finish,
                "stop_reason": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": None,
        },
    }
    return answer, kind


class Handler(BaseHTTPRequestHandler):
    state: ServerState
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # the JSON log replaces the access log
        pass

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, kind: str) -> None:
        self._send(status, {"error": {"message": message, "type": kind, "param": None, "code": status}})

    def _authorised(self) -> bool:
        key = self.state.args.api_key
        return key is None or self.headers.get("Authorization") == f"Bearer {key}"

    def do_GET(self) -> None:
        if self.path == "/v1/models":  # what a client's health probe asks: logged, as a "probe"
            refused = self.state.outage()
            status = self.state.args.outage_status if refused else 200
            self.state.record(
                {"t": round(time.time(), 3), "path": self.path, "status": status, "kind": "probe"}
            )
            if refused:
                self._error(status, "the engine is restarting", "ServiceUnavailable")
                return
        elif self.path != "/stats" and self.state.outage():  # a restarting server answers nothing
            self._error(self.state.args.outage_status, "the engine is restarting", "ServiceUnavailable")
            return
        if self.path == "/stats":
            with self.state.lock:
                stats = {"answered": self.state.answered, "refused_outage": self.state.refused_outage}
            self._send(200, stats)
        elif self.path == "/v1/models":
            served = self.state.args.model
            self._send(
                200, {"object": "list", "data": [{"id": served, "object": "model", "owned_by": "vllm"}]}
            )
        elif self.path == "/health":
            self._send(503 if self.state.outage() else 200, {})
        else:
            self._error(404, f"no route {self.path}", "NotFoundError")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        entry: dict[str, Any] = {"t": round(time.time(), 3), "path": self.path}
        try:
            if self.path != "/v1/chat/completions":
                raise BadRequest(404, f"no route {self.path}", "NotFoundError")
            if self.state.outage():
                raise BadRequest(
                    self.state.args.outage_status, "the engine is restarting", "ServiceUnavailable"
                )
            if not self._authorised():
                raise BadRequest(401, "Unauthorized", "AuthenticationError")
            body = json.loads(raw or b"{}")
            entry["model"] = body.get("model")
            if body.get("model") != self.state.args.model:
                raise BadRequest(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError")
            answer, kind = completion(body, self.state.args.model)
            entry["kind"] = kind
            if kind == "relevance":
                entry["question"] = (
                    body["messages"][-1]["content"].split("Question: ", 1)[-1].split("\n", 1)[0]
                )
            if self.state.args.latency_s:
                time.sleep(self.state.args.latency_s)
            entry["status"] = 200
            self.state.record(entry)
            self._send(200, answer)
        except BadRequest as exc:
            entry["status"] = exc.status
            self.state.record(entry)
            self._error(exc.status, str(exc), exc.kind)
        except (ValueError, KeyError, TypeError) as exc:
            entry["status"] = 400
            self.state.record(entry)
            self._error(400, f"{type(exc).__name__}: {exc}", "BadRequestError")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", default="served-model")
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--latency-s", type=float, default=0.0)
    parser.add_argument("--outage-after", type=int, default=None, help="answers before the outage starts")
    parser.add_argument("--outage-seconds", type=float, default=60.0)
    parser.add_argument("--outage-status", type=int, default=503)
    parser.add_argument("--log", default=None)
    args = parser.parse_args(argv)
    Handler.state = ServerState(args)
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    print(f"fake LLM server on http://{args.host}:{args.port}/v1 serving {args.model}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()

"""Test support for the voice-framework integrations. A scripted model: a local server speaking the OpenAI
Chat Completions protocol (``POST /v1/chat/completions``, streamed as server-sent events or not),
which answers each request with the next turn of its script instead of thinking. The frameworks'
own OpenAI services talk to it as they would to the real API, so the tests run their real
pipelines and sessions with no network and no model.

A turn is a sentence (the assistant says it) or a list of function calls ``(name, arguments)``.
A request whose newest message is a function result quoting a sentence to say (a late result
delivered through the framework) is answered with that sentence, and takes no turn.
Every request is kept (``requests``), so a test can read what the framework sent the model: the
function results among them."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import httpx

Turn = Union[str, Sequence[Tuple[str, Dict[str, Any]]]]


@dataclass
class ScriptedModel:
    """Serves ``script`` on a free loopback port; ``base_url`` is what an OpenAI client takes."""

    script: List[Turn]
    requests: List[Dict[str, Any]] = field(default_factory=list)
    _calls: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.endswith("/chat/completions"):
                    self.send_error(404)
                    return
                turn, number = model._next(body)
                if body.get("stream"):
                    self._stream(turn, number, body)
                else:
                    self._whole(turn, number, body)

            def _whole(self, turn: Turn, number: int, body: Dict[str, Any]) -> None:
                message: Dict[str, Any] = {"role": "assistant", "content": None}
                if isinstance(turn, str):
                    message["content"] = turn
                else:
                    message["tool_calls"] = [_tool_call(number, i, name, args) for i, (name, args) in enumerate(turn)]
                answer = {
                    "id": f"chatcmpl-{number}", "object": "chat.completion", "created": 0, "model": body.get("model", "scripted"),
                    "choices": [{"index": 0, "message": message, "finish_reason": "stop" if isinstance(turn, str) else "tool_calls"}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }
                raw = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _stream(self, turn: Turn, number: int, body: Dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                base = {"id": f"chatcmpl-{number}", "object": "chat.completion.chunk", "created": 0, "model": body.get("model", "scripted")}

                def chunk(delta: Dict[str, Any], finish: Any = None) -> None:
                    event = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
                    self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                    self.wfile.flush()

                chunk({"role": "assistant", "content": ""})
                if isinstance(turn, str):
                    chunk({"content": turn})
                    chunk({}, "stop")
                else:
                    for i, (name, args) in enumerate(turn):
                        call = _tool_call(number, i, name, args)
                        chunk({"tool_calls": [{"index": i, **call}]})
                    chunk({}, "tool_calls")
                if (body.get("stream_options") or {}).get("include_usage"):
                    usage = {**base, "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
                    self.wfile.write(f"data: {json.dumps(usage)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def _next(self, body: Dict[str, Any]) -> Tuple[Turn, int]:
        with self._lock:
            self.requests.append(body)
            self._calls += 1
            number = self._calls
            told = _told(body)
            if told is not None:
                return told, number
            turn: Turn = self.script.pop(0) if self.script else "(the script has no more turns)"
        return turn, number

    def function_results(self) -> List[Any]:
        """The function results the framework sent back in its last request, in order (the
        ``tool`` messages), each decoded when the framework sent it as JSON."""
        seen: List[Any] = []
        if self.requests:
            for message in self.requests[-1].get("messages", []):
                if message.get("role") == "tool":
                    content = message.get("content")
                    try:
                        seen.append(json.loads(content) if isinstance(content, str) else content)
                    except ValueError:
                        seen.append(content)
        return seen

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


_SAY_THIS = re.compile(r'Say this to the caller[^"]*"([\s\S]*)"\s*$')


def _told(body: Dict[str, Any]) -> Optional[str]:
    """The sentence a request asks the model to say, when its newest message is a function result
    that quotes one (how a late result is delivered through the framework: Pipecat's async
    functions). Such a request is answered with that sentence and takes no turn, as a model that
    follows its instructions would."""
    messages = body.get("messages") or []
    if not messages or messages[-1].get("role") not in ("tool", "developer"):
        return None
    text: Any = messages[-1].get("content")
    # The result may be JSON text, inside the framework's own JSON envelope (an async result).
    for _ in range(3):
        if isinstance(text, dict):
            text = text.get("result")
        elif isinstance(text, str):
            try:
                text = json.loads(text)
            except ValueError:
                break
        else:
            return None
    found = _SAY_THIS.search(text) if isinstance(text, str) else None
    return found.group(1) if found else None


def _tool_call(number: int, index: int, name: str, args: Dict[str, Any]) -> Dict[str, Any]:
    return {"id": f"call_{number}_{index}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


SEED = {"to": "john@gmail.com", "subject": "Meeting Tomorrow", "body": "See you at 10."}
"""The seed's email, as the caller first gives it."""


def play_example(name: str, conversation_id: str) -> List[str]:
    """Runs ``examples/<name>-relay/relay.py`` as a process, with a scripted model playing the
    seed's conversation (proposed, corrected, confirmed, the checkpoint's go-ahead) and the
    caller's four lines on its stdin; what the agent said, line by line."""
    model = ScriptedModel([
        [("send_email", SEED)], "I'll email john@gmail.com about the meeting. Shall I?",
        [("change_call", {"changes": {"to": "john.smith@gmail.com"}, "reason": "the caller corrected it"})],
        "Got it: john.smith@gmail.com. Shall I?",
        [("confirm_call", {})], "On it.",
        [("confirm_call", {})], "Going ahead.",
    ])
    lines = "Email John about tomorrow's meeting.\nActually it's john.smith@gmail.com.\nYes, send it.\nGo ahead.\n"
    relay = Path(__file__).resolve().parent.parent / "examples" / f"{name}-relay" / "relay.py"
    environment = {**os.environ, "OPENAI_BASE_URL": model.base_url, "OPENAI_API_KEY": "scripted", "LOGURU_LEVEL": "WARNING"}
    try:
        played = subprocess.run(
            [sys.executable, str(relay), "--session", conversation_id, "--model", "scripted", "--pause", "1.5"],
            input=lines, capture_output=True, text=True, timeout=120, env=environment, check=False,
        )
    finally:
        model.close()
    assert played.returncode == 0, played.stderr[-3000:]
    return [line[len("agent: "):] for line in played.stdout.splitlines() if line.startswith("agent: ")]


class SlowAnswers(httpx.AsyncBaseTransport):
    """Real requests to the real Gatehouse, whose answers to ``POST <path>...`` reach the relay
    ``delay`` seconds late (the first ``count`` of them; all when None): an interruption or a
    second yes then lands while the function call is under way."""

    def __init__(self, path: str, delay: float, count: Optional[int] = None) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self._path, self._delay, self._left = path, delay, count

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        slowed = self._left is None or self._left > 0
        if request.method == "POST" and request.url.path.startswith(self._path) and slowed:
            if self._left is not None:
                self._left -= 1
            await response.aread()
            await asyncio.sleep(self._delay)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class Hangs(httpx.AsyncBaseTransport):
    """A Gatehouse that hangs once the relay has its tools: the tool list is answered by the real
    one, every other request is accepted and never answered."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/voice-tools/tools":
            return await self._inner.handle_async_request(request)
        await asyncio.Event().wait()
        raise AssertionError("an event nobody sets was set")

    async def aclose(self) -> None:
        await self._inner.aclose()


TURN_COST_STEPS = ("propose", "confirm", "proceed")
"""The function calls of a conversation whose cost is measured: the proposal, the yes, the go-ahead."""


def percentile(samples: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile of ``samples`` (``fraction`` 0.5 for p50, 0.99 for p99)."""
    ordered = sorted(samples)
    return ordered[max(0, min(len(ordered) - 1, int(round(fraction * len(ordered) + 0.5)) - 1))]


async def direct_route_ms(gatehouse: Any, conversations: int) -> Dict[str, List[float]]:
    """Gatehouse's own latency for the routes behind each step, measured with the client alone:
    the create, the confirm and the resume of ``conversations`` seed emails, in milliseconds."""
    import time as clock

    measured: Dict[str, List[float]] = {step: [] for step in TURN_COST_STEPS}
    for n in range(conversations):
        session = f"turn-cost-direct-{n}-{os.getpid()}-{clock.monotonic_ns()}"
        started = clock.perf_counter()
        created = await gatehouse.create_tool_call({"session_id": session, "function_name": "send_email", "parameters": SEED})
        measured["propose"].append((clock.perf_counter() - started) * 1000)
        started = clock.perf_counter()
        await gatehouse.confirm_tool_call(created["tool_call_id"])
        measured["confirm"].append((clock.perf_counter() - started) * 1000)
        while (await gatehouse.get_tool_call(created["tool_call_id"]))["status"] != "PREPARED":
            await asyncio.sleep(0.02)
        started = clock.perf_counter()
        await gatehouse.resume_execution(created["tool_call_id"], {"action": "proceed"})
        measured["proceed"].append((clock.perf_counter() - started) * 1000)
    return measured


def report_turn_cost(framework: str, through_framework: Dict[str, List[float]], direct: Dict[str, List[float]]) -> str:
    """The table of what Gatehouse costs a turn in ``framework``: for each step, p50 and p99 (ms)
    from the model's function call to its answer, beside the route's own latency. Written to
    ``$GATEHOUSE_TURN_COST/<framework>.txt`` when set (integrations/test prints it); answered."""
    lines = [f"{framework}: from the model's function call to its answer, beside Gatehouse's own route (ms)"]
    for step in TURN_COST_STEPS:
        ours, route = through_framework[step], direct[step]
        lines.append(
            f"  {step:8} n={len(ours):2}  p50 {percentile(ours, 0.5):7.1f}  p99 {percentile(ours, 0.99):7.1f}"
            f"   route p50 {percentile(route, 0.5):7.1f}  p99 {percentile(route, 0.99):7.1f}"
        )
    text = "\n".join(lines) + "\n"
    folder = os.environ.get("GATEHOUSE_TURN_COST")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / f"{framework}.txt").write_text(text)
    return text

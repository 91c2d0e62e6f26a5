"""Test support for the Python realtime integration (docs/openai-realtime.md): a scripted model
behind a local server speaking the OpenAI Realtime protocol over WebSocket (``/v1/realtime``), so
that the ``openai-agents`` package's own ``OpenAIRealtimeWebSocketModel`` and ``RealtimeSession``
run as they would against the real API, with no network and no model. It plays the same part as
integrations/openai-realtime/test/scripted-realtime.mjs does for the JavaScript SDK, and takes the
same scripts.

Each ``response.create`` is answered with the next turn of the script: a sentence (an assistant
message, spoken: a second of audio with the sentence as its transcript, so that the caller can talk
over it) or function calls ``(name, arguments)``. A response asked for with instructions that
quote a sentence to say (how Gatehouse's package speaks what arrives later) says that sentence and
takes no turn. Every client event is kept in ``received``, across connections: the script goes on
when a relay restarts and connects again."""

from __future__ import annotations

import base64
import json
import re
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from websockets.asyncio.server import Server, ServerConnection, serve

Turn = Union[str, Sequence[Tuple[str, Dict[str, Any]]]]

SECOND_OF_SILENCE = base64.b64encode(bytes(48000)).decode()
"""One second of 24 kHz 16-bit silence: what a spoken sentence sounds like here."""

_QUOTED = re.compile(r'"([\s\S]*)"\s*$')


class ScriptedRealtime:
    """Serves ``script`` on a free loopback port once started (``await model.start()``);
    ``url`` is what the SDK's model config takes."""

    def __init__(self, script: Sequence[Turn]) -> None:
        self.script: List[Turn] = list(script)
        self.received: List[Dict[str, Any]] = []
        # By call id: when (time.perf_counter()) the model's function call was sent.
        self.called_at: Dict[str, float] = {}
        self._sockets: List[ServerConnection] = []
        self._items: Dict[str, Dict[str, Any]] = {}
        self._counter = 0
        self._server: Optional[Server] = None

    async def start(self) -> "ScriptedRealtime":
        self._server = await serve(self._accept, "127.0.0.1", 0, max_size=None)
        return self

    @property
    def url(self) -> str:
        assert self._server is not None, "start() the model first"
        port = next(iter(self._server.sockets)).getsockname()[1]
        return f"ws://127.0.0.1:{port}/v1/realtime"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def barge_in(self) -> None:
        """The caller starts talking over the agent: the server's voice activity detection says so."""
        await self._send(self._sockets[-1], {"type": "input_audio_buffer.speech_started", "audio_start_ms": 0, "item_id": self._id("item")})

    def outputs(self) -> List[Dict[str, str]]:
        """What the session sent as function outputs, in order."""
        return [
            {"call_id": event["item"]["call_id"], "output": event["item"]["output"]}
            for event in self.received
            if event.get("type") == "conversation.item.create" and event.get("item", {}).get("type") == "function_call_output"
        ]

    def _id(self, prefix: str) -> str:
        self._counter += 1
        return f"{prefix}_{self._counter}"

    async def _send(self, socket: ServerConnection, event: Dict[str, Any]) -> None:
        await socket.send(json.dumps({"event_id": self._id("event"), **event}))

    async def _accept(self, socket: ServerConnection) -> None:
        self._sockets.append(socket)
        session = {"type": "realtime", "object": "realtime.session", "id": self._id("sess"), "model": "scripted"}
        await self._send(socket, {"type": "session.created", "session": session})
        async for data in socket:
            event = json.loads(data)
            event["received_at"] = time.perf_counter()
            self.received.append(event)
            kind = event.get("type")
            if kind == "session.update":
                await self._send(socket, {"type": "session.updated", "session": {**session, **event.get("session", {})}})
            elif kind == "conversation.item.create":
                item = {"id": self._id("item"), "status": "completed", **event["item"]}
                await self._send(socket, {"type": "conversation.item.added", "previous_item_id": None, "item": item})
                await self._send(socket, {"type": "conversation.item.done", "previous_item_id": None, "item": item})
            elif kind == "conversation.item.truncate":
                # The caller talked over the agent: the audio past what was heard is dropped.
                truncated = {key: event[key] for key in ("item_id", "content_index", "audio_end_ms")}
                await self._send(socket, {"type": "conversation.item.truncated", **truncated})
            elif kind == "conversation.item.retrieve" and event.get("item_id") in self._items:
                await self._send(socket, {"type": "conversation.item.retrieved", "item": self._items[event["item_id"]]})
            elif kind == "response.create":
                await self._respond(socket, event.get("response") or {})

    async def _respond(self, socket: ServerConnection, request: Dict[str, Any]) -> None:
        instructions = request.get("instructions")
        quoted = _QUOTED.search(instructions) if isinstance(instructions, str) else None
        turn: Turn = quoted.group(1) if quoted else (self.script.pop(0) if self.script else "(the script has ended)")
        response: Dict[str, Any] = {"id": self._id("resp"), "object": "realtime.response", "status": "in_progress", "output": []}
        await self._send(socket, {"type": "response.created", "response": response})
        if isinstance(turn, str):
            content = [{"type": "output_audio", "transcript": turn}]
            items = [{"id": self._id("item"), "type": "message", "role": "assistant", "status": "completed", "content": content}]
        else:
            items = [
                {
                    "id": self._id("item"),
                    "type": "function_call",
                    "status": "completed",
                    "name": name,
                    "call_id": self._id("call"),
                    "arguments": json.dumps(arguments),
                }
                for name, arguments in turn
            ]
        for index, item in enumerate(items):
            if item["type"] == "function_call":
                self.called_at[item["call_id"]] = time.perf_counter()
            started = {**item, "status": "in_progress"}
            await self._send(socket, {"type": "response.output_item.added", "response_id": response["id"], "output_index": index, "item": started})
            await self._send(socket, {"type": "conversation.item.added", "previous_item_id": None, "item": started})
            self._items[item["id"]] = item
            if item["type"] == "message":
                part = {"response_id": response["id"], "item_id": item["id"], "output_index": index, "content_index": 0}
                transcript = item["content"][0]["transcript"]
                await self._send(socket, {"type": "response.output_audio.delta", **part, "delta": SECOND_OF_SILENCE})
                await self._send(socket, {"type": "response.output_audio_transcript.delta", **part, "delta": transcript})
                await self._send(socket, {"type": "response.output_audio.done", **part})
                await self._send(socket, {"type": "response.output_audio_transcript.done", **part, "transcript": transcript})
            await self._send(socket, {"type": "response.output_item.done", "response_id": response["id"], "output_index": index, "item": item})
            await self._send(socket, {"type": "conversation.item.done", "previous_item_id": None, "item": item})
        await self._send(socket, {"type": "response.done", "response": {**response, "status": "completed", "output": items}})

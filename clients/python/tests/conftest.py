"""Test infrastructure: the running application's address, a callback receiver, and a small TCP
proxy that misbehaves on purpose in front of the real application."""

from __future__ import annotations

import json
import os
import secrets
import socket
import threading
import time
from http.server import ThreadingHTTPServer
from typing import Any, Callable, Dict, List, Optional, Union
from urllib.parse import urlparse

import pytest

from gatehouse_client import Callback, Gatehouse, make_callback_handler


def _required(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"{name} is not set: clients/test sets it to the running Gatehouse")
    return value


URL = _required("GATEHOUSE_URL")
TOKEN = _required("GATEHOUSE_TOKEN")
SECRET = _required("GATEHOUSE_CALLBACK_SECRET")
OPENAPI = _required("GATEHOUSE_OPENAPI")
CHECKPOINT_TTL = float(os.environ.get("GATEHOUSE_CHECKPOINT_TTL", "0"))
# The same application with no reachable database: its own 503 database_unavailable answers.
DEGRADED_URL = _required("GATEHOUSE_DEGRADED_URL")
# A key of a tenant allowed one create a second (``rate_limited``), and its tenant.
LIMITED_KEY = _required("GATEHOUSE_LIMITED_KEY")
LIMITED_TENANT = _required("GATEHOUSE_LIMITED_TENANT")
# The runner's --body-read-timeout, in seconds (0: unknown).
BODY_READ_TIMEOUT = float(os.environ.get("GATEHOUSE_BODY_READ_TIMEOUT", "0"))


def _ports(text: str) -> range:
    low, sep, high = text.strip().partition("..")
    if not sep or not low.isdigit() or not high.isdigit():
        raise RuntimeError(f"GATEHOUSE_RELAY_PORTS is {text!r}, not low..high")
    return range(int(low), int(high) + 1)


# The loopback ports the tests' relays listen on (``low..high``, both included), which the
# application allows callbacks to (callback_allowed_hosts and callback_host): named ports, as a
# deployment names its relays, never a loopback wildcard.
RELAY_PORTS = _ports(_required("GATEHOUSE_RELAY_PORTS"))


def relay_server(handler: Any) -> ThreadingHTTPServer:
    """A ``ThreadingHTTPServer`` on a free port of the relays' range, tried from a start of this
    process's own so that parallel runs rarely try the same port first."""
    first = (os.getpid() * 7919 + time.time_ns() // 1000) % len(RELAY_PORTS)
    for i in range(len(RELAY_PORTS)):
        port = RELAY_PORTS[(first + i) % len(RELAY_PORTS)]
        try:
            return ThreadingHTTPServer(("127.0.0.1", port), handler)
        except OSError:
            continue
    raise RuntimeError(f"every port of {RELAY_PORTS} is taken")

SEED_EMAIL = {"to": "john@gmail.com", "subject": "Meeting Tomorrow", "body": "See you at 10."}


def client(**options: Any) -> Gatehouse:
    base = options.pop("base_url", URL)
    return Gatehouse(base, options.pop("token", TOKEN), **options)


def session(label: str) -> str:
    return f"py-{label}-{secrets.token_hex(4)}"


def traceparent() -> str:
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


class Receiver:
    """``make_callback_handler`` on a ``ThreadingHTTPServer``, keeping every verified callback."""

    def __init__(self, answer: Callable[[Callback], Optional[Dict[str, Any]]] = lambda c: None) -> None:
        self.callbacks: List[Callback] = []
        self.rejected: List[str] = []
        self._cond = threading.Condition()

        def on_callback(callback: Callback) -> Optional[Dict[str, Any]]:
            with self._cond:
                self.callbacks.append(callback)
                self._cond.notify_all()
            return answer(callback)

        handler = make_callback_handler(SECRET, on_callback, on_rejected=self.rejected.append)
        self.server = relay_server(handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/callbacks"

    def next(self, kind: str, tool_call_id: str, timeout: float = 15) -> Callback:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for c in self.callbacks:
                    if c.kind == kind and c.body.get("tool_call_id") == tool_call_id:
                        return c
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {kind} callback for {tool_call_id} in {timeout} s")
                self._cond.wait(left)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def raw_answer(status: int, reason: str, body: Dict[str, Any], headers: Optional[Dict[str, str]] = None) -> bytes:
    text = json.dumps(body).encode()
    lines = [f"HTTP/1.1 {status} {reason}", "Content-Type: application/json", f"Content-Length: {len(text)}", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + text


class Proxy:
    """A TCP proxy in front of the application. ``plan(n)`` decides what the n-th connection (from
    0) gets: "forward", "drop" (the request reaches the application, then the connection is cut
    before its answer reaches the client), "stall" (the request's head is forwarded and its body
    never: the application's answer comes back, then the connection is closed), or bytes (a raw
    HTTP answer from the proxy, never forwarded)."""

    def __init__(self, plan: Callable[[int], Union[str, bytes]]) -> None:
        target = urlparse(URL)
        self.target = (target.hostname, target.port)
        self.plan = plan
        self.stats = {"connections": 0, "forwarded": 0, "dropped": 0, "answered": 0, "stalled": 0}
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self._open: List[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            n = self.stats["connections"]
            self.stats["connections"] += 1
            threading.Thread(target=self._serve, args=(conn, n), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    @staticmethod
    def _read_answer(up: socket.socket) -> bytes:
        """One HTTP answer with a Content-Length, read whole (or up to the connection's end)."""
        answer = b""
        while True:
            end = answer.find(b"\r\n\r\n")
            if end >= 0:
                length = 0
                for line in answer[:end].split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value.strip())
                if len(answer) >= end + 4 + length:
                    return answer
            data = up.recv(65536)
            if not data:
                return answer
            answer += data

    def _stall(self, conn: socket.socket, up: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            data = conn.recv(65536)
            if not data:
                return
            head += data
        up.sendall(head[: head.index(b"\r\n\r\n") + 4])

        def drain() -> None:  # the body: read and dropped, so closing sends no reset
            try:
                while conn.recv(65536):
                    pass
            except OSError:
                pass

        threading.Thread(target=drain, daemon=True).start()
        answer = self._read_answer(up)
        self.stats["stalled"] += 1
        conn.sendall(answer)
        for s in (conn, up):
            try:
                s.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def _serve(self, conn: socket.socket, n: int) -> None:
        self._open.append(conn)
        what = self.plan(n)
        if isinstance(what, bytes):
            conn.recv(65536)
            self.stats["answered"] += 1
            conn.sendall(what)
            conn.close()
            return
        up = socket.create_connection(self.target)
        self._open.append(up)
        if what == "stall":
            self._stall(conn, up)
            return
        threading.Thread(target=self._pump, args=(conn, up), daemon=True).start()
        if what == "drop":
            up.recv(1)  # the application has answered: cut the client off before it sees a byte
            self.stats["dropped"] += 1
            for s in (conn, up):
                try:
                    s.shutdown(socket.SHUT_RDWR)  # wakes the pump thread and sends the FIN now
                except OSError:
                    pass
                s.close()
        else:
            self.stats["forwarded"] += 1
            self._pump(up, conn)

    def close(self) -> None:
        self._closed = True
        self.sock.close()
        for s in self._open:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                s.close()
            except OSError:
                pass

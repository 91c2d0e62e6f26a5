"""What the contract server remembers about each call, so that the ordering rules and
``execute``'s at-most-once hold across requests, workers and restarts (openapi/tool-contract.yaml,
"Ordering"); and the nonces it has spent.

The rules are here, once, as a pure function of a call's record (:func:`decide`, :func:`settle`,
:func:`release`). Where records live is a :class:`CallStore`: :class:`MemoryStore` for one
process, :class:`SqliteStore` for the workers of one host; any store with an atomic
compare-and-set (a PostgreSQL table, Redis) serves several hosts."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from typing import Any, Optional, Protocol, Union

from .tool import Call

# A call's record, as stored (JSON). ``state`` is one of the names below.
Record = dict[str, Any]

NEW, PREPARING, PREPARED, EXECUTING, EXECUTED, FAILED, DISCARDING, DISCARD_OWED, DISCARDED = (
    "new", "preparing", "prepared", "executing", "executed", "failed", "discarding", "discard_owed", "discarded",
)
_DISCARDS = (DISCARDING, DISCARD_OWED, DISCARDED)


@dataclass(frozen=True)
class Act:
    """Run the operation on ``call``; ``record`` is the claim to store first."""

    call: Call
    record: Record


@dataclass(frozen=True)
class Answer:
    """Do nothing; answer what the call recorded."""

    status: int
    body: dict[str, Any]


@dataclass(frozen=True)
class Refuse:
    """Do nothing; 409 with this sentence."""

    message: str


Decision = Union[Act, Answer, Refuse]


def decide(op: str, record: Optional[Record], request: dict[str, Any], needs_checkpoint: bool) -> Decision:
    """Whether ``op`` (prepare, execute or discard) may act on the call ``record`` describes
    (None: never seen), and the claim to store if so. A request with a higher ``attempt`` than an
    operation left under way takes it over: that operation crashed or was cut off."""
    attempt = _attempt(request)
    state = record["state"] if record else NEW
    current: Record = record or {
        "state": NEW,
        "attempt": 0,
        "parameters": request.get("parameters") or {},
        "session_id": request.get("session_id"),
        "checkpoint": None,
        "execute_claimed": False,
        "answers": {},
    }
    taken_over = state in (PREPARING, EXECUTING, DISCARDING) and attempt > current["attempt"]
    answers = current["answers"]

    def claim(new_state: str, may_have_started: bool = False, checkpoint: Any = None) -> Act:
        claimed = {**current, "state": new_state, "attempt": max(attempt, current["attempt"])}
        if new_state == EXECUTING:
            claimed["execute_claimed"] = True
        call = Call(
            tool_call_id=str(request["tool_call_id"]),
            parameters=current["parameters"],
            session_id=current.get("session_id"),
            checkpoint=checkpoint if checkpoint is not None else current.get("checkpoint"),
            attempt=attempt,
            side_effect_may_have_started=may_have_started,
            trace_id=request.get("trace_id"),
        )
        return Act(call=call, record=claimed)

    if op == "prepare":
        if state == NEW or (state == PREPARING and taken_over):
            return claim(PREPARING)
        if state == PREPARING:
            return Refuse("This call's prepare is already under way.")
        if state in _DISCARDS:
            return Refuse("This call's preparation was discarded; it will never run.")
        if "prepare" in answers:
            return Answer(*answers["prepare"])
        return Refuse("This call was never prepared.")
    if op == "execute":
        if state in _DISCARDS:
            return Refuse("This call's preparation was discarded; it will never run.")
        if state == PREPARING:
            return Refuse("This call is still being prepared.")
        if state == EXECUTING and not taken_over:
            return Refuse("This call's execute is already under way.")
        if "execute" in answers:
            return Answer(*answers["execute"])
        if state == PREPARED or (state == NEW and not needs_checkpoint) or taken_over:
            may_have_started = bool(request.get("side_effect_may_have_started")) or current["execute_claimed"]
            return claim(EXECUTING, may_have_started=may_have_started)
        return Refuse("This call was never prepared; execute comes after prepare.")
    if op == "discard":
        if state in (EXECUTING, EXECUTED):
            return Refuse("This call was executed; there is nothing to discard.")
        if state == DISCARDED:
            return Answer(*answers["discard"])
        if state == PREPARING:
            return Refuse("This call's prepare is under way; discard it when that has answered.")
        if state == DISCARDING and not taken_over:
            return Refuse("This call's discard is already under way.")
        checkpoint = current.get("checkpoint") or request.get("checkpoint")
        return claim(DISCARDING, checkpoint=checkpoint)
    raise ValueError(f"{op} does not act on a call")


def settle(op: str, claimed: Record, status: int, body: dict[str, Any]) -> Record:
    """The record once ``op`` answered ``status`` (200, or the tool's 422) with ``body``."""
    answers = {**claimed["answers"], op: [status, body]}
    if op == "prepare":
        state = PREPARED if status == 200 else FAILED
        return {**claimed, "state": state, "checkpoint": body.get("checkpoint"), "answers": answers}
    if op == "execute":
        return {**claimed, "state": EXECUTED if status == 200 else FAILED, "answers": answers}
    return {**claimed, "state": DISCARDED if status == 200 else DISCARD_OWED, "answers": answers}


def release(op: str, claimed: Record) -> Record:
    """The record after ``op`` crashed: it may run again (an ``execute`` then with
    ``side_effect_may_have_started``, which ``execute_claimed`` keeps)."""
    if op == "prepare":
        return {**claimed, "state": NEW}
    if op == "execute":
        return {**claimed, "state": PREPARED if "prepare" in claimed["answers"] else NEW}
    return {**claimed, "state": DISCARD_OWED}


def _attempt(request: dict[str, Any]) -> int:
    attempt = request.get("attempt", 1)
    return attempt if isinstance(attempt, int) and not isinstance(attempt, bool) and attempt >= 1 else 1


class CallStore(Protocol):
    """Where records live. ``version`` 0 means absent; :meth:`save` stores ``record`` only if the
    call is still at ``version`` (and then at ``version + 1``), and says whether it did."""

    def load(self, call_id: str) -> tuple[Optional[Record], int]: ...

    def save(self, call_id: str, record: Record, version: int) -> bool: ...

    def spend_nonce(self, nonce: str, expires_at: float) -> bool:
        """True the first time ``nonce`` is spent before ``expires_at``; False for a replay."""
        ...


class MemoryStore:
    """Records in this process's memory: for one process (and tests). A restart forgets every
    call, so after one a repeated ``execute`` is run again (with ``side_effect_may_have_started``
    only if Gatehouse sets it): use :class:`SqliteStore` or a shared store in production. At most
    ``max_calls`` records are kept, the oldest forgotten first."""

    def __init__(self, max_calls: int = 100_000) -> None:
        self._lock = threading.Lock()
        self._calls: dict[str, tuple[Record, int]] = {}
        self._nonces: dict[str, float] = {}
        self._max_calls = max_calls

    def load(self, call_id: str) -> tuple[Optional[Record], int]:
        with self._lock:
            record, version = self._calls.get(call_id, (None, 0))
            return (json.loads(json.dumps(record)) if record else None), version

    def save(self, call_id: str, record: Record, version: int) -> bool:
        with self._lock:
            if self._calls.get(call_id, (None, 0))[1] != version:
                return False
            self._calls.pop(call_id, None)
            self._calls[call_id] = (json.loads(json.dumps(record)), version + 1)
            while len(self._calls) > self._max_calls:
                self._calls.pop(next(iter(self._calls)))
            return True

    def spend_nonce(self, nonce: str, expires_at: float) -> bool:
        with self._lock:
            now = time.time()
            if len(self._nonces) > 10_000:
                self._nonces = {n: at for n, at in self._nonces.items() if at > now}
            if self._nonces.get(nonce, 0) > now:
                return False
            self._nonces[nonce] = expires_at
            return True


class SqliteStore:
    """Records in an SQLite file, shared by the workers of one host and kept across restarts.
    Records older than ``keep_days`` are forgotten (Gatehouse settles a call within hours)."""

    def __init__(self, path: str, keep_days: float = 7.0) -> None:
        self._path = path
        self._keep_seconds = keep_days * 86_400
        self._local = threading.local()
        with self._connection() as db:
            db.executescript(
                """
                CREATE TABLE IF NOT EXISTS contract_calls (
                    call_id TEXT PRIMARY KEY, version INTEGER NOT NULL, record TEXT NOT NULL,
                    updated_at REAL NOT NULL);
                CREATE TABLE IF NOT EXISTS contract_nonces (nonce TEXT PRIMARY KEY, expires_at REAL NOT NULL);
                CREATE INDEX IF NOT EXISTS contract_nonces_expiry ON contract_nonces (expires_at);
                CREATE INDEX IF NOT EXISTS contract_calls_age ON contract_calls (updated_at);
                """
            )

    def _connection(self) -> sqlite3.Connection:
        db: Optional[sqlite3.Connection] = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self._path, timeout=10, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            self._local.db = db
        return db

    def load(self, call_id: str) -> tuple[Optional[Record], int]:
        row = self._connection().execute(
            "SELECT record, version FROM contract_calls WHERE call_id = ?", (call_id,)
        ).fetchone()
        return (json.loads(row[0]), int(row[1])) if row else (None, 0)

    def save(self, call_id: str, record: Record, version: int) -> bool:
        db = self._connection()
        text, now = json.dumps(record), time.time()
        if version == 0:
            cursor = db.execute(
                "INSERT INTO contract_calls (call_id, version, record, updated_at) VALUES (?, 1, ?, ?) "
                "ON CONFLICT (call_id) DO NOTHING",
                (call_id, text, now),
            )
            if cursor.rowcount == 1:
                db.execute("DELETE FROM contract_calls WHERE updated_at < ?", (now - self._keep_seconds,))
        else:
            cursor = db.execute(
                "UPDATE contract_calls SET record = ?, version = version + 1, updated_at = ? "
                "WHERE call_id = ? AND version = ?",
                (text, now, call_id, version),
            )
        return cursor.rowcount == 1

    def spend_nonce(self, nonce: str, expires_at: float) -> bool:
        db = self._connection()
        now = time.time()
        db.execute("DELETE FROM contract_nonces WHERE expires_at < ?", (now,))
        cursor = db.execute(
            "INSERT INTO contract_nonces (nonce, expires_at) VALUES (?, ?) ON CONFLICT (nonce) DO NOTHING",
            (nonce, expires_at),
        )
        return cursor.rowcount == 1

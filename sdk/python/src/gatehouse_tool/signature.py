"""The signing recipe (openapi/tool-contract.yaml, "Signatures"; docs/tools.md, "Signatures"):
``X-Gatehouse-Contract-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>,n=<nonce>``, the MAC keyed
with the shared ``contract_secret`` over
``<t> "." <nonce> LF <METHOD> SP <target> LF <Idempotency-Key> LF <body>``, where ``target`` is the
path and query as sent and the key is empty when the request has none. A signature covers the
method, the target and the key, so a captured ``prepare`` cannot be sent as an ``execute`` or to
another call; its timestamp bounds a replay to the window, and its nonce is spent once within it.
openapi/signing-test-vector.json is the worked example this module is tested against."""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from enum import Enum
from typing import Optional, Sequence, Union

from .contract import REPLAY_WINDOW_SECONDS

Secret = Union[str, bytes]
_NONCE = re.compile(r"^[0-9a-f]{16,64}$")
_HEX = re.compile(r"^(?:[0-9a-fA-F]{2})+$")
_DIGITS = re.compile(r"^[0-9]{1,12}$")


@dataclass(frozen=True)
class Signed:
    """What a valid signature vouches for: this nonce is the request's own, and may be forgotten
    after ``expires_at`` (unix seconds), when the timestamp alone refuses the request."""

    nonce: str
    expires_at: int


class Refusal(str, Enum):
    """Which part of a signature failed; the value is the code a 401 carries."""

    MISSING = "signature_missing"
    """No header, or not ``t=<digits>,v1=<hex>,n=<nonce>``."""
    STALE = "signature_stale"
    """The timestamp is outside the replay window of this host's clock."""
    MISMATCH = "signature_mismatch"
    """No ``v1`` is the MAC of this request with any of the secrets."""
    REPLAYED = "signature_replayed"
    """The nonce was spent before (only the nonce store can tell)."""

    @property
    def sentence(self) -> str:
        return _SENTENCES[self]


_SENTENCES = {
    Refusal.MISSING: "This request is not signed by Gatehouse.",
    Refusal.STALE: "This request's signature is too old, or the two hosts' clocks disagree.",
    Refusal.MISMATCH: "This request's signature does not match it: a different secret or a changed request.",
    Refusal.REPLAYED: "This signed request was already used; each one is good once.",
}


def _key(secret: Secret) -> bytes:
    return secret.encode("utf-8") if isinstance(secret, str) else bytes(secret)


def content(timestamp: int, nonce: str, method: str, target: str, body: bytes, idempotency_key: str = "") -> bytes:
    """The bytes the MAC is over: ``<t> "." <nonce> LF <METHOD> SP <target> LF <key> LF <body>``."""
    return f"{timestamp}.{nonce}\n{method.upper()} {target}\n{idempotency_key}\n".encode("utf-8") + body


def sign(
    secret: Secret, unix_seconds: int, nonce: str, method: str, target: str, body: bytes, idempotency_key: str = ""
) -> str:
    """The header value Gatehouse sends for this request (for tests and for callers of a tool)."""
    signed = content(unix_seconds, nonce, method, target, body, idempotency_key)
    mac = hmac.new(_key(secret), signed, hashlib.sha256).hexdigest()
    return f"t={unix_seconds},v1={mac},n={nonce}"


def check(
    secrets: Union[Secret, Sequence[Secret]],
    header: Optional[str],
    method: str,
    target: str,
    body: bytes,
    now: float,
    idempotency_key: str = "",
) -> Union[Signed, Refusal]:
    """The nonce to spend if ``header`` signs this request with one of ``secrets`` (two while a
    secret is rotated) and a timestamp within the replay window of ``now``; otherwise which part
    failed."""
    if not header or len(header) > 1024:
        return Refusal.MISSING
    timestamp: Optional[int] = None
    nonce: Optional[str] = None
    macs: list[bytes] = []
    for part in header.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep:
            return Refusal.MISSING
        if key in ("t", "n") and (timestamp if key == "t" else nonce) is not None:
            return Refusal.MISSING  # a second t or n is ambiguous
        if key == "t":
            if not _DIGITS.match(value):
                return Refusal.MISSING
            timestamp = int(value)
        elif key == "n":
            if not _NONCE.match(value):
                return Refusal.MISSING
            nonce = value
        elif key == "v1":
            if not _HEX.match(value):
                return Refusal.MISSING
            macs.append(bytes.fromhex(value))
    if timestamp is None or nonce is None or not macs:
        return Refusal.MISSING
    if abs(now - timestamp) > REPLAY_WINDOW_SECONDS:
        return Refusal.STALE
    keys: list[Secret] = [secrets] if isinstance(secrets, (str, bytes)) else list(secrets)
    signed = content(timestamp, nonce, method, target, body, idempotency_key)
    for secret in keys:
        expected = hmac.new(_key(secret), signed, hashlib.sha256).digest()
        if any(hmac.compare_digest(expected, mac) for mac in macs):
            return Signed(nonce=nonce, expires_at=timestamp + REPLAY_WINDOW_SECONDS)
    return Refusal.MISMATCH


def verify(
    secrets: Union[Secret, Sequence[Secret]],
    header: Optional[str],
    method: str,
    target: str,
    body: bytes,
    now: float,
    idempotency_key: str = "",
) -> Optional[Signed]:
    """:func:`check`, with any refusal as None."""
    checked = check(secrets, header, method, target, body, now, idempotency_key)
    return checked if isinstance(checked, Signed) else None

"""The contract signature (openapi/tool-contract.yaml, "Signatures"):
``X-Gatehouse-Contract-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>,n=<nonce>``, the MAC keyed
with the shared ``contract_secret`` over ``<t>.<nonce> LF <METHOD> SP <path> LF <body>``. A
signature covers the method and the path, so a captured ``prepare`` cannot be sent as an
``execute``; its timestamp bounds a replay to the window, and its nonce is spent once within it."""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
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


def _key(secret: Secret) -> bytes:
    return secret.encode("utf-8") if isinstance(secret, str) else bytes(secret)


def _content(timestamp: int, nonce: str, method: str, path: str, body: bytes) -> bytes:
    return f"{timestamp}.{nonce}\n{method.upper()} {path}\n".encode("utf-8") + body


def sign(secret: Secret, unix_seconds: int, nonce: str, method: str, path: str, body: bytes) -> str:
    """The header value Gatehouse sends for this request (for tests and for callers of a tool)."""
    mac = hmac.new(_key(secret), _content(unix_seconds, nonce, method, path, body), hashlib.sha256).hexdigest()
    return f"t={unix_seconds},v1={mac},n={nonce}"


def verify(
    secrets: Union[Secret, Sequence[Secret]],
    header: Optional[str],
    method: str,
    path: str,
    body: bytes,
    now: float,
) -> Optional[Signed]:
    """The nonce to spend if ``header`` signs this request with one of ``secrets`` (two while a
    secret is rotated) and a timestamp within the replay window of ``now``; otherwise None."""
    if not header or len(header) > 1024:
        return None
    timestamp: Optional[int] = None
    nonce: Optional[str] = None
    macs: list[bytes] = []
    for part in header.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep:
            continue
        if key == "t" and _DIGITS.match(value):
            timestamp = int(value)
        elif key == "n" and _NONCE.match(value):
            nonce = value
        elif key == "v1" and _HEX.match(value):
            macs.append(bytes.fromhex(value))
    if timestamp is None or nonce is None or not macs or abs(now - timestamp) > REPLAY_WINDOW_SECONDS:
        return None
    keys: list[Secret] = [secrets] if isinstance(secrets, (str, bytes)) else list(secrets)
    content = _content(timestamp, nonce, method, path, body)
    for secret in keys:
        expected = hmac.new(_key(secret), content, hashlib.sha256).digest()
        if any(hmac.compare_digest(expected, mac) for mac in macs):
            return Signed(nonce=nonce, expires_at=timestamp + REPLAY_WINDOW_SECONDS)
    return None

"""Callback signatures: ``X-Gatehouse-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, t + "." + body)>``."""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from typing import Optional, Sequence, Union

SIGNATURE_HEADER = "X-Gatehouse-Signature"
CALLBACK_KIND_HEADER = "X-Gatehouse-Callback"

Bytes = Union[str, bytes, bytearray, memoryview]
_HEX = re.compile(r"^(?:[0-9a-fA-F]{2})+$")
_DIGITS = re.compile(r"^[0-9]+$")


def _b(value: Bytes) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


def _mac(secret: Bytes, timestamp: str, body: Bytes) -> bytes:
    return hmac.new(_b(secret), timestamp.encode("ascii") + b"." + _b(body), hashlib.sha256).digest()


def sign_callback(secret: Bytes, body: Bytes, unix_seconds: Optional[int] = None) -> str:
    """The header Gatehouse would send for ``body`` at ``unix_seconds``. For tests."""
    t = int(time.time()) if unix_seconds is None else unix_seconds
    return f"t={t},v1={_mac(secret, str(t), body).hex()}"


def verify_callback(
    secret: Union[Bytes, Sequence[Bytes]],
    header: Optional[str],
    raw_body: Bytes,
    tolerance: int = 300,
    now: Optional[int] = None,
) -> bool:
    """Checks an ``X-Gatehouse-Signature`` header against the raw body, as the Rust
    ``gatehouse_domain::callback::verify`` does: some ``v1=`` value (there may be several while a
    secret is rotated) must be the HMAC-SHA256 of ``t + "." + body``, compared in constant time,
    and ``t`` must be within ``tolerance`` seconds of now, so a captured callback cannot be replayed.

    ``secret`` may be a list of secrets (the receiving side of a rotation). ``raw_body`` must be the
    bytes as received, before any JSON parsing."""
    if not header:
        return False
    timestamp: Optional[str] = None
    signatures = []
    for part in header.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep:
            continue
        if key == "t":
            timestamp = value if _DIGITS.match(value) else None
        elif key == "v1" and _HEX.match(value):
            signatures.append(bytes.fromhex(value))
    if timestamp is None or not signatures:
        return False
    current = int(time.time()) if now is None else now
    if abs(current - int(timestamp)) > tolerance:
        return False
    secrets = [secret] if isinstance(secret, (str, bytes, bytearray, memoryview)) else list(secret)
    ok = False
    # Every candidate is compared, whatever matched before, so the time taken does not say which.
    for s in secrets:
        expected = _mac(s, timestamp, raw_body)
        for signature in signatures:
            if hmac.compare_digest(signature, expected):
                ok = True
    return ok

"""Callback signatures, by Gatehouse's one signing recipe (docs/architecture.md, "Signed hops";
openapi/signing-test-vector.json is the worked example these functions are tested against):

``X-Gatehouse-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>[,v1=<hex>...],n=<nonce>``, the MAC
keyed with the tenant's callback secret over
``<t> "." <nonce> LF "POST" SP <target> LF LF <body>``: ``target`` is the path and query the
callback was posted to, and the empty line is its ``Idempotency-Key`` (a callback carries none).
So a signature vouches for one callback to one relay path: the time bounds a capture to the
tolerance, and the nonce, spent once (:class:`SpentNonces`), makes it single-use within it."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets as _random
import threading
import time
from typing import Dict, Optional, Sequence, Union

SIGNATURE_HEADER = "X-Gatehouse-Signature"
CALLBACK_KIND_HEADER = "X-Gatehouse-Callback"
TENANT_HEADER = "X-Gatehouse-Tenant"
"""Names the tenant a callback is for, as its payload's ``tenant`` does: a relay serving several
tenants picks the secret to verify with by it."""

Bytes = Union[str, bytes, bytearray, memoryview]
_HEX = re.compile(r"^(?:[0-9a-fA-F]{2})+$")
_DIGITS = re.compile(r"^[0-9]{1,12}$")
_NONCE = re.compile(r"^[0-9a-f]{16,64}$")
_MAX_HEADER = 1024


def _b(value: Bytes) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


def _mac(secret: Bytes, timestamp: int, nonce: str, target: str, body: Bytes) -> bytes:
    content = f"{timestamp}.{nonce}\nPOST {target}\n\n".encode("utf-8") + _b(body)
    return hmac.new(_b(secret), content, hashlib.sha256).digest()


def sign_callback(
    secret: Bytes, target: str, body: Bytes, unix_seconds: Optional[int] = None, nonce: Optional[str] = None
) -> str:
    """The header Gatehouse would send for ``body`` posted to ``target``. For tests."""
    t = int(time.time()) if unix_seconds is None else unix_seconds
    n = nonce or _random.token_hex(16)
    return f"t={t},v1={_mac(secret, t, n, target, body).hex()},n={n}"


class SpentNonces:
    """The nonces of callbacks this relay accepted, each kept until its signature would be too old
    anyway, so a callback captured and sent again within the tolerance is refused. In memory, for
    one process; a relay running several processes shares the set (a table keyed by nonce)."""

    def __init__(self, limit: int = 100_000) -> None:
        self._expiry: Dict[str, float] = {}
        self._limit = limit
        self._lock = threading.Lock()

    def spend(self, nonce: str, expires_at: float, now: float) -> bool:
        """True the first time ``nonce`` is spent; False for a replay, or when the set is full of
        live nonces (refusing is safe: Gatehouse signs its retry afresh)."""
        with self._lock:
            if nonce in self._expiry and self._expiry[nonce] >= now:
                return False
            if len(self._expiry) >= self._limit:
                self._expiry = {n: at for n, at in self._expiry.items() if at >= now}
                if len(self._expiry) >= self._limit:
                    return False
            self._expiry[nonce] = expires_at
            return True


def verify_callback(
    secret: Union[Bytes, Sequence[Bytes]],
    header: Optional[str],
    target: str,
    raw_body: Bytes,
    tolerance: int = 300,
    now: Optional[int] = None,
    nonces: Optional[SpentNonces] = None,
) -> bool:
    """Checks an ``X-Gatehouse-Signature`` header against the callback as received: ``target`` is
    the path and query it was posted to and ``raw_body`` its bytes before any JSON parsing. Some
    ``v1=`` (there are two while a secret is rotated) must be the MAC of this callback with
    ``secret`` (or one of a list of secrets), compared in constant time, ``t`` within
    ``tolerance`` seconds of now, and, given ``nonces``, the nonce not spent before (it is spent
    now)."""
    if not header or len(header) > _MAX_HEADER:
        return False
    timestamp: Optional[int] = None
    nonce: Optional[str] = None
    signatures = []
    for part in header.split(","):
        key, sep, value = part.strip().partition("=")
        if key == "t" and _DIGITS.match(value) and timestamp is None:
            timestamp = int(value)
        elif key == "n" and _NONCE.match(value) and nonce is None:
            nonce = value
        elif key == "v1" and _HEX.match(value):
            signatures.append(bytes.fromhex(value))
        else:
            return False
    if timestamp is None or nonce is None or not signatures:
        return False
    current = int(time.time()) if now is None else now
    if abs(current - timestamp) > tolerance:
        return False
    keys = [secret] if isinstance(secret, (str, bytes, bytearray, memoryview)) else list(secret)
    ok = False
    # Every candidate is compared, whatever matched before, so the time taken does not say which.
    for candidate in keys:
        expected = _mac(candidate, timestamp, nonce, target, raw_body)
        for signature in signatures:
            if hmac.compare_digest(signature, expected):
                ok = True
    return ok and (nonces is None or nonces.spend(nonce, timestamp + tolerance, current))

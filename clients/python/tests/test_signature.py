"""verify_callback on its own: the published vector and every way a header can be wrong."""

import json
from pathlib import Path

from gatehouse_client import SpentNonces, sign_callback, verify_callback

from conftest import OPENAPI

# The published vector, beside the OpenAPI document.
VECTOR = json.loads((Path(OPENAPI).parent / "signing-test-vector.json").read_text())["callback"]
BODY = b'{"tool_call_id":"tc_000000000001"}'
PATH = "/callbacks"
NOW = 1_700_000_000
NONCE = "0123456789abcdef0123456789abcdef"


def test_the_published_callback_vector_signs_and_verifies():
    v = VECTOR
    assert sign_callback(v["secret"], v["target"], v["body"], v["timestamp"], v["nonce"]) == v["header"]
    assert verify_callback(v["secret"], v["header"], v["target"], v["body"].encode(), 300, now=v["timestamp"])


def test_tampering_another_secret_path_and_stale_or_future_timestamps_fail():
    header = sign_callback("whsec", PATH, BODY, NOW, NONCE)
    assert verify_callback("whsec", header, PATH, BODY, 300, now=NOW + 10)
    assert verify_callback("whsec", header, PATH, BODY.decode(), 300, now=NOW + 10)
    assert not verify_callback("whsec", header, PATH, BODY.replace(b"1", b"2"), 300, now=NOW + 10)
    assert not verify_callback("whsec", header, "/callbacks/other", BODY, 300, now=NOW + 10)
    assert not verify_callback("whsec", header, PATH + "?x=1", BODY, 300, now=NOW + 10)
    assert not verify_callback("other", header, PATH, BODY, 300, now=NOW + 10)
    assert not verify_callback("whsec", header, PATH, BODY, 300, now=NOW + 301)
    assert not verify_callback("whsec", header, PATH, BODY, 300, now=NOW - 301)
    assert verify_callback("whsec", header, PATH, BODY, 300, now=NOW + 300)
    forged = header.replace(f"t={NOW}", f"t={NOW + 100}")
    assert not verify_callback("whsec", forged, PATH, BODY, 300, now=NOW + 100)
    other_nonce = header.replace(f"n={NONCE}", "n=" + "f" * 32)
    assert not verify_callback("whsec", other_nonce, PATH, BODY, 300, now=NOW)


def test_a_nonce_is_spent_once():
    nonces = SpentNonces()
    header = sign_callback("whsec", PATH, BODY, NOW, NONCE)
    assert verify_callback("whsec", header, PATH, BODY, 300, now=NOW, nonces=nonces)
    assert not verify_callback("whsec", header, PATH, BODY, 300, now=NOW + 1, nonces=nonces)
    assert verify_callback("whsec", sign_callback("whsec", PATH, BODY, NOW), PATH, BODY, 300, now=NOW, nonces=nonces)
    full = SpentNonces(limit=1)
    assert full.spend("a" * 16, NOW + 300, NOW)
    assert not full.spend("b" * 16, NOW + 300, NOW), "full of live nonces: refused"
    assert full.spend("b" * 16, NOW + 900, NOW + 301), "the expired one is forgotten"


def test_several_v1_values_and_several_secrets():
    good = sign_callback("new", PATH, BODY, NOW, NONCE).split(",")[1]
    old = sign_callback("old", PATH, BODY, NOW, NONCE).split(",")[1]
    both = f"t={NOW},{old},{good},n={NONCE}"
    assert verify_callback("new", both, PATH, BODY, 300, now=NOW)
    assert verify_callback("old", both, PATH, BODY, 300, now=NOW)
    assert not verify_callback("third", both, PATH, BODY, 300, now=NOW)
    assert verify_callback(["third", "new"], f"t={NOW},{good},n={NONCE}", PATH, BODY, 300, now=NOW)
    assert verify_callback("new", f" t={NOW} , {good} , n={NONCE} ", PATH, BODY, 300, now=NOW)


def test_malformed_headers_are_refused_never_raised_on():
    for header in [None, "", "v1=00", f"t={NOW}", f"t={NOW},v1=zz,n={NONCE}", f"t=abc,v1=00,n={NONCE}",
                   f"t={NOW},v1=,n={NONCE}", f"t={NOW},v1=0,n={NONCE}", f"t={NOW},v1=00", f"t={NOW},v1=00,n=short",
                   "garbage", "t=1," * 400]:
        assert verify_callback("whsec", header, PATH, BODY, 300, now=NOW) is False, header
    header = sign_callback("whsec", PATH, BODY, NOW, NONCE)
    assert not verify_callback("whsec", header[:-2], PATH, BODY, 300, now=NOW)


def test_a_relay_serving_several_tenants_picks_the_secret_by_the_tenant_header():
    import asyncio

    from gatehouse_client import callback_asgi_app

    received, rejected = [], []
    app = callback_asgi_app({"acme": "acme-secret", "globex": ["globex-new", "globex-old"]}, received.append,
                            on_rejected=rejected.append)

    def deliver(tenant, secret, payload_tenant=None):
        raw = json.dumps({"tool_call_id": "tc_0123456789ab", "tenant": payload_tenant or tenant}).encode()
        headers = [(b"x-gatehouse-signature", sign_callback(secret, PATH, raw).encode()), (b"x-gatehouse-callback", b"completion")]
        if tenant is not None:
            headers.append((b"x-gatehouse-tenant", tenant.encode()))
        sent = []

        async def receive():
            return {"type": "http.request", "body": raw}

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": PATH, "raw_path": PATH.encode(), "query_string": b"", "headers": headers}
        asyncio.run(app(scope, receive, send))
        return sent[0]["status"]

    assert deliver("acme", "acme-secret") == 200
    assert deliver("globex", "globex-old") == 200, "either secret of a rotation"
    assert deliver("acme", "globex-new") == 401, "another tenant's secret"
    assert deliver("globex", "acme-secret") == 401
    assert deliver("initech", "acme-secret") == 401, "a tenant the relay does not serve"
    assert deliver(None, "acme-secret") == 401, "no tenant named"
    assert deliver("acme", "acme-secret", payload_tenant="globex") == 401, "the payload names another tenant"
    assert [c.body["tenant"] for c in received] == ["acme", "globex"] and len(rejected) == 5

"""verify_callback on its own: the known vector and every way a header can be wrong."""

from gatehouse_client import sign_callback, verify_callback

BODY = b'{"tool_call_id":"tc_000000000001"}'
NOW = 1_700_000_000
VECTOR = "t=1,v1=1ba6b8171186efc613e8bcc0cbdab2748f24984d7c5a84faa2637afa0e40d224"


def test_the_signature_is_hmac_sha256_of_t_dot_body_as_rust_and_openssl_compute_it():
    assert sign_callback("key", "{}", 1) == VECTOR
    assert verify_callback("key", VECTOR, b"{}", 300, now=1)


def test_tampering_another_secret_and_stale_or_future_timestamps_fail():
    header = sign_callback("whsec", BODY, NOW)
    assert verify_callback("whsec", header, BODY, 300, now=NOW + 10)
    assert verify_callback("whsec", header, BODY.decode(), 300, now=NOW + 10)
    assert not verify_callback("whsec", header, BODY.replace(b"1", b"2"), 300, now=NOW + 10)
    assert not verify_callback("other", header, BODY, 300, now=NOW + 10)
    assert not verify_callback("whsec", header, BODY, 300, now=NOW + 301)
    assert not verify_callback("whsec", header, BODY, 300, now=NOW - 301)
    assert verify_callback("whsec", header, BODY, 300, now=NOW + 300)
    forged = header.replace(f"t={NOW}", f"t={NOW + 100}")
    assert not verify_callback("whsec", forged, BODY, 300, now=NOW + 100)


def test_several_v1_values_and_several_secrets():
    good = sign_callback("new", BODY, NOW).split(",v1=")[1]
    old = sign_callback("old", BODY, NOW).split(",v1=")[1]
    assert verify_callback("new", f"t={NOW},v1={old},v1={good}", BODY, 300, now=NOW)
    assert verify_callback("old", f"t={NOW},v1={old},v1={good}", BODY, 300, now=NOW)
    assert not verify_callback("third", f"t={NOW},v1={old},v1={good}", BODY, 300, now=NOW)
    assert verify_callback(["third", "new"], f"t={NOW},v1={good}", BODY, 300, now=NOW)
    assert verify_callback("new", f" t={NOW} , v1={good} ", BODY, 300, now=NOW)


def test_malformed_headers_are_refused_never_raised_on():
    for header in [None, "", "v1=00", f"t={NOW}", f"t={NOW},v1=zz", "t=abc,v1=00", f"t={NOW},v1=", f"t={NOW},v1=0", "garbage"]:
        assert verify_callback("whsec", header, BODY, 300, now=NOW) is False, header
    header = sign_callback("whsec", BODY, NOW)
    assert not verify_callback("whsec", header[:-2], BODY, 300, now=NOW)

"""connector.signing: fixed vectors, rotation, tolerance, strict parsing and properties.

Vectors come from /work/shared/spec/signature-vectors.md; expected values are literals
from that file (or frozen here, with how they were produced), never recomputed by the
code under test.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import time

import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st
from multidict import CIMultiDict, CIMultiDictProxy
from pydantic import SecretStr, ValidationError

from connector.signing import (
    FORMSTEP_EVENT_ID_HEADER,
    FORMSTEP_EVENT_TYPE_HEADER,
    FORMSTEP_SIGNATURE_HEADER,
    GITHUB,
    LEGACY_SIGNATURE_HEADER,
    MAX_HEADER_LENGTH,
    CustomScheme,
    Reason,
    SigningConfigError,
    Verification,
    custom_headers,
    formstep_headers,
    generate_standard_keypair,
    sign_custom,
    sign_formstep,
    sign_standard,
    standard_headers,
    standard_public_key,
    verify,
    verify_custom,
    verify_formstep,
    verify_standard,
)

# ---------------------------------------------------------------- vectors (spec/signature-vectors.md)

HOSTED_SECRET = "whsec_abababababababababababababababababababababababababababababababab"
HOSTED_T = 1700000000
HOSTED_BODY = b'{"id":"evt_01example","type":"request.completed","test":true}'
HOSTED_HEADER = "t=1700000000,sha256=0693fdb507d63901918d9742024797e116c2d84a880e394063e7c296d9f0ad5d"

SW_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SW_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
SW_T = 1614265330
SW_BODY = b'{"test": 2432232314}'
SW_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
SW_SIGNATURE_CHANGED = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA="

GH_SECRET = "It's a Secret to Everybody"
GH_BODY = b"Hello, World!"
GH_HEADER = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"

# v1a: the Ed25519 seed is the secret key of RFC 8032 section 7.1, TEST 1
# (9d61b19d...1cae7f60); its public key there is d75a9801...f707511a. The signature below
# was produced once with that fixed seed by sign_standard over the v1 reference vector's
# id, timestamp and body, and frozen here; Ed25519 is deterministic, so it never changes.
V1A_SECRET = "whsk_nWGxne/9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A="
V1A_PUBLIC = "whpk_11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="
V1A_SIGNATURE = "v1a,fldxM4gAKugP6nnt1hdz3sgGfZ6d99nzrMFnZOELIxbzEHoVmAb2ADpkJK7zgPePmPsle0zV9jSeGlHFG2NVAw=="
RFC8032_TEST1_PUBLIC_HEX = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"

# A custom scheme with every option away from its default.
STAMPED = CustomScheme(
    name="stamped",
    signature_header="X-Acme-Signature",
    timestamp_header="X-Acme-Timestamp",
    id_header="X-Acme-Delivery",
    prefix="v0=",
    encoding="base64",
    digest="sha512",
    template="v0:{id}:{timestamp}:{body}",
    secret_encoding="base64",
)
STAMPED_SECRET = "whsec_" + base64.b64encode(b"stamped-secret-key-0123456789").decode()


def hosted_headers(value: str = HOSTED_HEADER) -> dict[str, str]:
    return {FORMSTEP_SIGNATURE_HEADER: value}


def sw_headers(signature: str = SW_SIGNATURE, msg_id: str = SW_ID, timestamp: str = str(SW_T)) -> dict[str, str]:
    return {"webhook-id": msg_id, "webhook-timestamp": timestamp, "webhook-signature": signature}


def assert_fails(result: Verification, reason: Reason) -> None:
    assert isinstance(result, Verification)
    assert result.ok is False
    assert not result
    assert result.reason == reason, result
    assert result.detail
    assert result.secret_index is None


def test_hosted_vector_signs_and_verifies():
    assert sign_formstep(HOSTED_SECRET, HOSTED_BODY, HOSTED_T) == HOSTED_HEADER
    result = verify_formstep(hosted_headers(), HOSTED_BODY, HOSTED_SECRET, now=HOSTED_T)
    assert result.ok and result
    assert (result.scheme, result.reason, result.timestamp, result.secret_index) == ("formstep", None, HOSTED_T, 0)
    assert verify(hosted_headers(), HOSTED_BODY, HOSTED_SECRET, now=HOSTED_T).ok  # "formstep" is the default


def test_hosted_whsec_secret_is_raw_utf8_not_base64():
    # The part after whsec_ is valid base64, so a verifier that decoded it would compute another digest.
    decoded_key = base64.b64decode(HOSTED_SECRET.removeprefix("whsec_"))
    decoded_digest = hmac.new(decoded_key, b"1700000000." + HOSTED_BODY, hashlib.sha256).hexdigest()
    assert "sha256=" + decoded_digest != HOSTED_HEADER.split(",")[1]
    forged_by_decoding = f"t={HOSTED_T},sha256={decoded_digest}"
    assert_fails(
        verify_formstep(hosted_headers(forged_by_decoding), HOSTED_BODY, HOSTED_SECRET, now=HOSTED_T),
        Reason.SIGNATURE_MISMATCH,
    )
    assert verify_formstep(hosted_headers(), HOSTED_BODY, HOSTED_SECRET, now=HOSTED_T).ok


def test_hosted_body_change_fails():
    result = verify_formstep(hosted_headers(), HOSTED_BODY + b" ", HOSTED_SECRET, now=HOSTED_T)
    assert_fails(result, Reason.SIGNATURE_MISMATCH)
    assert "X-Formstep-Signature" in result.detail


def test_hosted_legacy_header_accepted_as_fallback():
    result = verify_formstep({LEGACY_SIGNATURE_HEADER: HOSTED_HEADER}, HOSTED_BODY, HOSTED_SECRET, now=HOSTED_T)
    assert result.ok
    lower = verify_formstep({"x-formbase-signature": HOSTED_HEADER}, HOSTED_BODY, HOSTED_SECRET, now=HOSTED_T)
    assert lower.ok


def test_hosted_current_header_wins_over_legacy():
    bad = "t=1700000000,sha256=" + "0" * 64
    headers = {FORMSTEP_SIGNATURE_HEADER: bad, LEGACY_SIGNATURE_HEADER: HOSTED_HEADER}
    assert_fails(verify_formstep(headers, HOSTED_BODY, HOSTED_SECRET, now=HOSTED_T), Reason.SIGNATURE_MISMATCH)


def test_hosted_missing_header():
    result = verify_formstep({"Content-Type": "application/json"}, HOSTED_BODY, HOSTED_SECRET, now=HOSTED_T)
    assert_fails(result, Reason.MISSING_HEADER)
    assert FORMSTEP_SIGNATURE_HEADER in result.detail and LEGACY_SIGNATURE_HEADER in result.detail


# A vector produced by the sandbox's own signer (formservice.delivery.sign) over a body
# encoded as the sandbox encodes deliveries (compact JSON, UTF-8, not ASCII-escaped),
# frozen here; the sandbox is checked to still produce it.
SANDBOX_SECRET = "whsec_" + "5a" * 32
SANDBOX_T = 1777629600
SANDBOX_BODY = ('{"id":"evt_sandboxvector000000001","type":"request.canceled","createdAt":"2026-05-01T10:00:00.000Z",'
                '"apiVersion":"2026-09-24","test":false,"data":{"request":{"id":"req_sandboxvector000000001",'
                '"status":"canceled","cancelReason":"Zurückgezogen"}}}').encode()
SANDBOX_HEADER = "t=1777629600,sha256=50f8b4808c68c335c170c08d1872ca14ee34a1de069130e4b614588195265d8c"


def test_sandbox_vector():
    from formservice.delivery import sign as sandbox_sign

    assert sandbox_sign(SANDBOX_SECRET, SANDBOX_BODY, SANDBOX_T) == SANDBOX_HEADER, "the sandbox signs as frozen"
    assert sign_formstep(SANDBOX_SECRET, SANDBOX_BODY, SANDBOX_T) == SANDBOX_HEADER
    assert verify(hosted_headers(SANDBOX_HEADER), SANDBOX_BODY, SANDBOX_SECRET, now=SANDBOX_T + 299).ok
    ascii_escaped = SANDBOX_BODY.replace("ü".encode(), b"\\u00fc")
    assert_fails(verify(hosted_headers(SANDBOX_HEADER), ascii_escaped, SANDBOX_SECRET, now=SANDBOX_T),
                 Reason.SIGNATURE_MISMATCH)


async def test_real_sandbox_deliveries_verify(sandbox):
    """Deliveries the sandbox sends over HTTP (a completion and a cancellation callback
    with the workspace secret, a replay signed again, a subscription delivery
    with its own secret) verify with the right secret only, and not once changed."""
    from tests.spec.test_webhooks import Receiver

    form = sandbox.pro.forms["Contact"]
    sub_secret = "whsec_" + "9d" * 32
    async with Receiver() as catcher:
        assert (await sandbox.rpc("webhooks.create", {"formId": form, "targetUrl": catcher.url("webhooks"),
                                                      "provider": "n8n", "signingSecret": sub_secret})).status == 200
        ids = []
        for _ in range(2):
            r = await sandbox.rpc("requests.create", {"formId": form, "callbackUrl": catcher.url("callbacks")})
            assert r.status == 200, r.body
            ids.append(r.data["id"])
        assert (await sandbox.helper("requests.complete", {"requestId": ids[0], "answers": {
            "name": "Zoë Ünal", "email": "zoe@example.test"}})).status == 200
        assert (await sandbox.rpc("requests.cancel", {"requestId": ids[1], "reason": "Zurückgezogen"})).status == 200
        link = await sandbox.rpc("shareLinks.create", {"formId": form})
        assert (await sandbox.helper("shareLinks.submit", {"url": link.data["url"], "answers": {
            "name": "Ada", "email": "ada@example.test"}})).status == 200
        await sandbox.helper("deliveries.flush")
        await catcher.wait("callbacks", 2)
        assert (await sandbox.rpc("requests.replayCallback", {"requestId": ids[0]})).status == 200
        await sandbox.helper("deliveries.flush")
        callbacks = await catcher.wait("callbacks", 3)
        [webhook] = await catcher.wait("webhooks", 1)
    assert sorted(h.json["type"] for h in callbacks) == ["request.canceled", "request.completed", "request.completed"]
    for hit, secret in [*((h, sandbox.pro.signing_secret) for h in callbacks), (webhook, sub_secret)]:
        result = verify(hit.headers, hit.body, [OTHER_SECRET_FOR_ROTATION, secret])
        assert result.ok and result.secret_index == 1, (hit.path, result)
        assert hit.headers[FORMSTEP_EVENT_ID_HEADER] == hit.json["id"]
        assert_fails(verify(hit.headers, hit.body, OTHER_SECRET_FOR_ROTATION), Reason.SIGNATURE_MISMATCH)
        assert_fails(verify(hit.headers, hit.body[:-1] + b" }", secret), Reason.SIGNATURE_MISMATCH)
    completed = [h for h in callbacks if h.json["type"] == "request.completed"]
    assert len({h.json["id"] for h in completed}) == 1, "a replay keeps the event id"


OTHER_SECRET_FOR_ROTATION = "whsec_" + "01" * 32


def test_formstep_headers_carry_event_id_and_type():
    headers = formstep_headers(HOSTED_SECRET, HOSTED_BODY, HOSTED_T, event_id="evt_01example", event_type="request.completed")
    assert headers[FORMSTEP_SIGNATURE_HEADER] == HOSTED_HEADER
    assert headers[FORMSTEP_EVENT_ID_HEADER] == "evt_01example"
    assert headers[FORMSTEP_EVENT_TYPE_HEADER] == "request.completed"
    assert headers["Content-Type"] == "application/json"
    with pytest.raises(SigningConfigError, match="event_id"):
        formstep_headers(HOSTED_SECRET, HOSTED_BODY, HOSTED_T, event_id="evt 1", event_type="request.completed")


def test_standard_v1_reference_vector():
    assert sign_standard(SW_SECRET, SW_ID, SW_BODY, SW_T) == SW_SIGNATURE
    result = verify_standard(sw_headers(), SW_BODY, SW_SECRET, now=SW_T)
    assert result.ok
    assert (result.scheme, result.timestamp, result.message_id, result.secret_index) == ("standard", SW_T, SW_ID, 0)
    assert verify(sw_headers(), SW_BODY, SW_SECRET, "standard", now=SW_T).ok


def test_standard_v1_one_character_change_fails():
    result = verify_standard(sw_headers(SW_SIGNATURE_CHANGED), SW_BODY, SW_SECRET, now=SW_T)
    assert_fails(result, Reason.SIGNATURE_MISMATCH)


def test_standard_v1_secret_without_prefix_is_the_same_key():
    assert verify_standard(sw_headers(), SW_BODY, SW_SECRET.removeprefix("whsec_"), now=SW_T).ok


def test_standard_v1_id_and_timestamp_are_signed():
    assert_fails(
        verify_standard(sw_headers(msg_id=SW_ID + "x"), SW_BODY, SW_SECRET, now=SW_T), Reason.SIGNATURE_MISMATCH
    )
    assert_fails(
        verify_standard(sw_headers(timestamp=str(SW_T + 1)), SW_BODY, SW_SECRET, now=SW_T),
        Reason.SIGNATURE_MISMATCH,
    )


def test_standard_missing_headers_named():
    result = verify_standard({"webhook-signature": SW_SIGNATURE}, SW_BODY, SW_SECRET, now=SW_T)
    assert_fails(result, Reason.MISSING_HEADER)
    assert "webhook-id" in result.detail and "webhook-timestamp" in result.detail


def test_github_vector():
    assert sign_custom(GITHUB, GH_SECRET, GH_BODY) == GH_HEADER
    assert custom_headers(GITHUB, GH_SECRET, GH_BODY) == {"X-Hub-Signature-256": GH_HEADER}
    result = verify({"X-Hub-Signature-256": GH_HEADER}, GH_BODY, GH_SECRET, GITHUB)
    assert result.ok and result.scheme == "github" and result.timestamp is None
    assert_fails(verify({"X-Hub-Signature-256": GH_HEADER}, b"Hello, World?", GH_SECRET, GITHUB), Reason.SIGNATURE_MISMATCH)


def test_github_sha1_variant_matches_independent_hmac():
    sha1 = CustomScheme(name="github-sha1", signature_header="X-Hub-Signature", prefix="sha1=", digest="sha1")
    expected = "sha1=" + hmac.new(GH_SECRET.encode(), GH_BODY, hashlib.sha1).hexdigest()
    assert sign_custom(sha1, GH_SECRET, GH_BODY) == expected
    assert verify({"x-hub-signature": expected}, GH_BODY, GH_SECRET, sha1).ok


def test_custom_raw_secret_keeps_whsec_prefix():
    expected = "sha256=" + hmac.new(HOSTED_SECRET.encode(), GH_BODY, hashlib.sha256).hexdigest()
    assert sign_custom(GITHUB, HOSTED_SECRET, GH_BODY) == expected
    assert verify({"X-Hub-Signature-256": expected}, GH_BODY, HOSTED_SECRET, GITHUB).ok
    stripped = "sha256=" + hmac.new(HOSTED_SECRET.removeprefix("whsec_").encode(), GH_BODY, hashlib.sha256).hexdigest()
    assert_fails(verify({"X-Hub-Signature-256": stripped}, GH_BODY, HOSTED_SECRET, GITHUB), Reason.SIGNATURE_MISMATCH)


def test_custom_scheme_can_express_standard_v1():
    # Configured like Standard Webhooks v1, the custom scheme must accept the reference vector.
    like_standard = CustomScheme(
        name="sw-like",
        signature_header="webhook-signature",
        timestamp_header="webhook-timestamp",
        id_header="webhook-id",
        prefix="v1,",
        encoding="base64",
        template="{id}.{timestamp}.{body}",
        secret_encoding="base64",
    )
    assert sign_custom(like_standard, SW_SECRET, SW_BODY, timestamp=SW_T, message_id=SW_ID) == SW_SIGNATURE
    assert verify(sw_headers(), SW_BODY, SW_SECRET, like_standard, now=SW_T).ok
    assert_fails(
        verify(sw_headers(SW_SIGNATURE_CHANGED), SW_BODY, SW_SECRET, like_standard, now=SW_T),
        Reason.SIGNATURE_MISMATCH,
    )


def test_custom_scheme_every_option():
    headers = custom_headers(STAMPED, STAMPED_SECRET, b"payload", timestamp=HOSTED_T, message_id="dlv_1")
    key = b"stamped-secret-key-0123456789"
    expected = base64.b64encode(hmac.new(key, b"v0:dlv_1:1700000000:payload", hashlib.sha512).digest()).decode()
    assert headers == {"X-Acme-Signature": "v0=" + expected, "X-Acme-Timestamp": "1700000000", "X-Acme-Delivery": "dlv_1"}
    result = verify_custom(headers, b"payload", STAMPED_SECRET, STAMPED, now=HOSTED_T)
    assert (result.ok, result.scheme, result.timestamp, result.message_id) == (True, "stamped", HOSTED_T, "dlv_1")
    for name in ("X-Acme-Signature", "X-Acme-Timestamp", "X-Acme-Delivery"):
        partial = {k: v for k, v in headers.items() if k != name}
        assert_fails(verify_custom(partial, b"payload", STAMPED_SECRET, STAMPED, now=HOSTED_T), Reason.MISSING_HEADER)


# ---------------------------------------------------------------- v1a (Ed25519)


def test_v1a_fixed_vector():
    assert standard_public_key(V1A_SECRET) == V1A_PUBLIC
    assert base64.b64decode(V1A_PUBLIC.removeprefix("whpk_")).hex() == RFC8032_TEST1_PUBLIC_HEX
    assert sign_standard(V1A_SECRET, SW_ID, SW_BODY, SW_T) == V1A_SIGNATURE
    result = verify_standard(sw_headers(V1A_SIGNATURE), SW_BODY, V1A_PUBLIC, now=SW_T)
    assert result.ok and result.message_id == SW_ID
    assert_fails(verify_standard(sw_headers(V1A_SIGNATURE), b"{}", V1A_PUBLIC, now=SW_T), Reason.SIGNATURE_MISMATCH)


def test_v1a_round_trip_with_generated_keys():
    signing, public = generate_standard_keypair()
    assert signing.startswith("whsk_") and public.startswith("whpk_")
    assert standard_public_key(signing) == public
    headers = standard_headers(signing, "msg_roundtrip", HOSTED_BODY, HOSTED_T)
    assert headers["webhook-signature"].startswith("v1a,")
    assert verify(headers, HOSTED_BODY, public, "standard", now=HOSTED_T).ok
    assert_fails(verify(headers, HOSTED_BODY, V1A_PUBLIC, "standard", now=HOSTED_T), Reason.SIGNATURE_MISMATCH)


def test_v1a_accepts_64_byte_signing_key():
    seed = base64.b64decode(V1A_SECRET.removeprefix("whsk_"))
    long_form = "whsk_" + base64.b64encode(seed + bytes.fromhex(RFC8032_TEST1_PUBLIC_HEX)).decode()
    assert sign_standard(long_form, SW_ID, SW_BODY, SW_T) == V1A_SIGNATURE
    bad_pair = "whsk_" + base64.b64encode(seed + bytes(32)).decode()
    with pytest.raises(SigningConfigError, match="public key"):
        sign_standard(bad_pair, SW_ID, SW_BODY, SW_T)


def test_v1a_signature_is_not_checked_with_hmac_secret():
    # A v1a entry must not be accepted by a v1 secret, nor a v1 entry by a public key.
    assert_fails(verify_standard(sw_headers(V1A_SIGNATURE), SW_BODY, SW_SECRET, now=SW_T), Reason.SIGNATURE_MISMATCH)
    assert_fails(verify_standard(sw_headers(), SW_BODY, V1A_PUBLIC, now=SW_T), Reason.SIGNATURE_MISMATCH)


def test_standard_mixed_entries_and_keys():
    header = sign_standard([SW_SECRET, V1A_SECRET], SW_ID, SW_BODY, SW_T)
    assert header == f"{SW_SIGNATURE} {V1A_SIGNATURE}"
    assert verify_standard(sw_headers(header), SW_BODY, V1A_PUBLIC, now=SW_T).ok
    assert verify_standard(sw_headers(header), SW_BODY, SW_SECRET, now=SW_T).ok
    both = verify_standard(sw_headers(header), SW_BODY, [V1A_PUBLIC, SW_SECRET], now=SW_T)
    assert both.ok and both.secret_index == 0


def test_standard_unknown_versions_are_skipped():
    future = "v2,bm90IGEgc2lnbmF0dXJl"
    assert verify_standard(sw_headers(f"{future} {SW_SIGNATURE}"), SW_BODY, SW_SECRET, now=SW_T).ok
    only_future = verify_standard(sw_headers(future), SW_BODY, SW_SECRET, now=SW_T)
    assert_fails(only_future, Reason.SIGNATURE_MISMATCH)
    assert "no v1 or v1a entry" in only_future.detail


# ---------------------------------------------------------------- rotation and secrets


def test_rotation_hosted_old_and_new_secrets():
    old, new = "whsec_" + "0" * 64, "whsec_" + "1" * 64
    signed_with_old = hosted_headers(sign_formstep(old, HOSTED_BODY, HOSTED_T))
    signed_with_new = hosted_headers(sign_formstep(new, HOSTED_BODY, HOSTED_T))
    assert verify_formstep(signed_with_old, HOSTED_BODY, [old, new], now=HOSTED_T).secret_index == 0
    assert verify_formstep(signed_with_new, HOSTED_BODY, [old, new], now=HOSTED_T).secret_index == 1
    assert verify_formstep(signed_with_new, HOSTED_BODY, (SecretStr(new),), now=HOSTED_T).ok
    result = verify_formstep(signed_with_old, HOSTED_BODY, [new, HOSTED_SECRET], now=HOSTED_T)
    assert_fails(result, Reason.SIGNATURE_MISMATCH)
    assert "2 configured secrets" in result.detail


def test_rotation_standard_sender_signs_with_both():
    new_secret = "whsec_" + base64.b64encode(b"the-new-secret-of-24-bytes").decode()
    header = sign_standard([SW_SECRET, new_secret], SW_ID, SW_BODY, SW_T)
    assert header.split(" ")[0] == SW_SIGNATURE and len(header.split(" ")) == 2
    assert verify_standard(sw_headers(header), SW_BODY, new_secret, now=SW_T).ok
    assert verify_standard(sw_headers(header), SW_BODY, SW_SECRET, now=SW_T).ok
    other = "whsec_" + base64.b64encode(b"unrelated-secret-bytes!!").decode()
    assert_fails(verify_standard(sw_headers(header), SW_BODY, other, now=SW_T), Reason.SIGNATURE_MISMATCH)
    assert verify_standard(sw_headers(SW_SIGNATURE), SW_BODY, [other, SW_SECRET], now=SW_T).secret_index == 1


def test_rotation_custom():
    header = {"X-Hub-Signature-256": GH_HEADER}
    assert verify_custom(header, GH_BODY, ["new secret", GH_SECRET], GITHUB).secret_index == 1
    assert_fails(verify_custom(header, GH_BODY, ["new secret"], GITHUB), Reason.SIGNATURE_MISMATCH)


@pytest.mark.parametrize("secrets", [None, [], "", [""], SecretStr(""), ("", SecretStr(""))])
@pytest.mark.parametrize("scheme", ["formstep", "standard", GITHUB])
def test_no_secret(secrets, scheme):
    headers = {**hosted_headers(), **sw_headers(), "X-Hub-Signature-256": GH_HEADER}
    assert_fails(verify(headers, HOSTED_BODY, secrets, scheme, now=HOSTED_T), Reason.NO_SECRET)


# ---------------------------------------------------------------- tolerance


def signed_at(scheme: object, t: int) -> tuple[dict[str, str], str | CustomScheme]:
    """Headers of HOSTED_BODY signed at ``t`` under one of the timestamped schemes, and the scheme."""
    if scheme == "formstep":
        return hosted_headers(sign_formstep(HOSTED_SECRET, HOSTED_BODY, t)), "formstep"
    if scheme == "standard":
        return standard_headers(SW_SECRET, SW_ID, HOSTED_BODY, t), "standard"
    return custom_headers(STAMPED, STAMPED_SECRET, HOSTED_BODY, timestamp=t, message_id="dlv_1"), STAMPED


SECRET_OF = {"formstep": HOSTED_SECRET, "standard": SW_SECRET, "stamped": STAMPED_SECRET}


@pytest.mark.parametrize("name", ["formstep", "standard", "stamped"])
@pytest.mark.parametrize(
    ("offset", "ok"),
    [(0, True), (300, True), (-300, True), (301, False), (-301, False), (300.5, False), (-300.5, False), (10**6, False)],
)
def test_tolerance_both_directions(name, offset, ok):
    headers, scheme = signed_at(name, HOSTED_T)
    result = verify(headers, HOSTED_BODY, SECRET_OF[name], scheme, now=HOSTED_T + offset)
    if ok:
        assert result.ok and result.timestamp == HOSTED_T
    else:
        assert_fails(result, Reason.TIMESTAMP_OUT_OF_TOLERANCE)
        assert ("old" if offset > 0 else "in the future") in result.detail


def test_tolerance_is_configurable():
    headers, _ = signed_at("formstep", HOSTED_T)
    assert verify_formstep(headers, HOSTED_BODY, HOSTED_SECRET, tolerance=10, now=HOSTED_T + 10).ok
    assert_fails(
        verify_formstep(headers, HOSTED_BODY, HOSTED_SECRET, tolerance=10, now=HOSTED_T - 11),
        Reason.TIMESTAMP_OUT_OF_TOLERANCE,
    )
    assert verify_formstep(headers, HOSTED_BODY, HOSTED_SECRET, tolerance=0, now=HOSTED_T).ok


def test_now_defaults_to_the_clock():
    t = int(time.time())
    fresh = hosted_headers(sign_formstep(HOSTED_SECRET, HOSTED_BODY, t))
    assert verify_formstep(fresh, HOSTED_BODY, HOSTED_SECRET).ok
    assert_fails(verify_formstep(hosted_headers(), HOSTED_BODY, HOSTED_SECRET), Reason.TIMESTAMP_OUT_OF_TOLERANCE)


def test_tolerance_applies_before_signature_check_to_a_forged_stale_header():
    forged = "t=1,sha256=" + "a" * 64
    assert_fails(verify_formstep(hosted_headers(forged), HOSTED_BODY, HOSTED_SECRET, now=HOSTED_T), Reason.TIMESTAMP_OUT_OF_TOLERANCE)


# ---------------------------------------------------------------- strict parsing

HEX = HOSTED_HEADER.split("sha256=")[1]

MALFORMED_HOSTED = {
    "empty": "",
    "missing sha256": "t=1700000000",
    "missing t": f"sha256={HEX}",
    "empty t": f"t=,sha256={HEX}",
    "parts swapped": f"sha256={HEX},t=1700000000",
    "short hex": f"t=1700000000,sha256={HEX[:-1]}",
    "long hex": f"t=1700000000,sha256={HEX}0",
    "uppercase hex": f"t=1700000000,sha256={HEX.upper()}",
    "non-hex": f"t=1700000000,sha256={HEX[:-1]}g",
    "duplicate t": f"t=1700000000,t=1700000000,sha256={HEX}",
    "duplicate sha256": f"t=1700000000,sha256={HEX},sha256={HEX}",
    "other algorithm": f"t=1700000000,sha512={HEX}",
    "leading space": " " + HOSTED_HEADER,
    "trailing space": HOSTED_HEADER + " ",
    "trailing newline": HOSTED_HEADER + "\n",
    "space after comma": HOSTED_HEADER.replace(",", ", "),
    "space around equals": HOSTED_HEADER.replace("t=", "t = "),
    "tab": HOSTED_HEADER.replace(",", ",\t"),
    "semicolon": HOSTED_HEADER.replace(",", ";"),
    "uppercase key": HOSTED_HEADER.replace("t=", "T="),
    "negative t": HOSTED_HEADER.replace("t=", "t=-"),
    "decimal t": HOSTED_HEADER.replace(",", ".5,"),
    "arabic-indic digits": f"t=\u0661\u0667\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660,sha256={HEX}",
    "fullwidth digit": HOSTED_HEADER.replace("t=1", "t=\uff11"),
    "non-ascii letter": HOSTED_HEADER[:-1] + "\u00e9",
    "nul byte": HOSTED_HEADER.replace(",", "\x00,"),
    "huge t": f"t={'9' * 10_000},sha256={HEX}",
    "16-digit t": f"t={'1' * 16},sha256={HEX}",
    "huge value": HOSTED_HEADER + "0" * 1_000_000,
    "just over the length cap": HOSTED_HEADER + "0" * (MAX_HEADER_LENGTH - len(HOSTED_HEADER) + 1),
}


@pytest.mark.parametrize("value", MALFORMED_HOSTED.values(), ids=MALFORMED_HOSTED.keys())
def test_hosted_malformed_header(value):
    result = verify_formstep(hosted_headers(value), HOSTED_BODY, HOSTED_SECRET, now=HOSTED_T)
    assert_fails(result, Reason.MALFORMED_HEADER)
    assert FORMSTEP_SIGNATURE_HEADER in result.detail


def test_hosted_grammar_error_says_what_is_accepted():
    result = verify_formstep(hosted_headers("sha256=x"), HOSTED_BODY, HOSTED_SECRET, now=HOSTED_T)
    assert "t=<unix seconds>,sha256=<64 lowercase hex digits>" in result.detail


def test_hosted_leading_zeros_are_signed_as_written():
    # The digest covers t exactly as sent, so a sender that pads t must sign the padded text.
    padded = "t=01700000000,sha256=" + hmac.new(HOSTED_SECRET.encode(), b"01700000000." + HOSTED_BODY, hashlib.sha256).hexdigest()
    assert verify_formstep(hosted_headers(padded), HOSTED_BODY, HOSTED_SECRET, now=HOSTED_T).ok
    reused = "t=01700000000," + HOSTED_HEADER.split(",")[1]
    assert_fails(verify_formstep(hosted_headers(reused), HOSTED_BODY, HOSTED_SECRET, now=HOSTED_T), Reason.SIGNATURE_MISMATCH)


B64_SIG = SW_SIGNATURE.removeprefix("v1,")

MALFORMED_STANDARD_SIGNATURE = {
    "empty": "",
    "version only": "v1",
    "empty value": "v1,",
    "no version": B64_SIG,
    "missing comma": "v1" + B64_SIG,
    "equals instead of comma": "v1=" + B64_SIG,
    "short v1": "v1," + B64_SIG[:-4],
    "long v1": "v1," + base64.b64encode(bytes(33)).decode(),
    "v1a with 32 bytes": "v1a," + B64_SIG,
    "missing padding": SW_SIGNATURE.rstrip("="),
    "extra padding": SW_SIGNATURE + "=",
    "non-canonical base64": SW_SIGNATURE[:-2] + "F=",
    "urlsafe alphabet": "v1," + B64_SIG.replace("+", "-").replace("/", "_"),
    "double space": f"{SW_SIGNATURE}  {SW_SIGNATURE}",
    "leading space": " " + SW_SIGNATURE,
    "trailing space": SW_SIGNATURE + " ",
    "comma separated": f"{SW_SIGNATURE},{SW_SIGNATURE}",
    "tab separated": f"{SW_SIGNATURE}\t{SW_SIGNATURE}",
    "newline": SW_SIGNATURE + "\n",
    "uppercase version": "V1," + B64_SIG,
    "non-ascii": "v1," + B64_SIG[:-2] + "\u00e9=",
    "huge": " ".join([SW_SIGNATURE] * 100_000),
}


@pytest.mark.parametrize("value", MALFORMED_STANDARD_SIGNATURE.values(), ids=MALFORMED_STANDARD_SIGNATURE.keys())
def test_standard_malformed_signature_header(value):
    result = verify_standard(sw_headers(value), SW_BODY, SW_SECRET, now=SW_T)
    assert_fails(result, Reason.MALFORMED_HEADER)
    assert "webhook-signature" in result.detail


MALFORMED_STANDARD_OTHER = {
    "empty id": {"webhook-id": ""},
    "id with space": {"webhook-id": "msg 1"},
    "id with control": {"webhook-id": "msg\x01"},
    "id non-ascii": {"webhook-id": "msg_\u00e9"},
    "id too long": {"webhook-id": "m" * 257},
    "empty timestamp": {"webhook-timestamp": ""},
    "timestamp not digits": {"webhook-timestamp": "1614265330.0"},
    "timestamp negative": {"webhook-timestamp": "-1614265330"},
    "timestamp padded": {"webhook-timestamp": " 1614265330"},
    "timestamp huge": {"webhook-timestamp": "9" * 5000},
    "timestamp arabic-indic": {"webhook-timestamp": "\u0661\u0666\u0661\u0664"},
}


@pytest.mark.parametrize("override", MALFORMED_STANDARD_OTHER.values(), ids=MALFORMED_STANDARD_OTHER.keys())
def test_standard_malformed_id_or_timestamp(override):
    (name,) = override
    result = verify_standard({**sw_headers(), **override}, SW_BODY, SW_SECRET, now=SW_T)
    assert_fails(result, Reason.MALFORMED_HEADER)
    assert name in result.detail


MALFORMED_GITHUB = {
    "no prefix": GH_HEADER.removeprefix("sha256="),
    "other prefix": GH_HEADER.replace("sha256=", "sha1="),
    "uppercase hex": "sha256=" + GH_HEADER.removeprefix("sha256=").upper(),
    "short": GH_HEADER[:-1],
    "long": GH_HEADER + "0",
    "trailing space": GH_HEADER + " ",
    "two signatures": f"{GH_HEADER},{GH_HEADER}",
    "non-ascii": GH_HEADER[:-1] + "\u0660",
}


@pytest.mark.parametrize("value", MALFORMED_GITHUB.values(), ids=MALFORMED_GITHUB.keys())
def test_custom_malformed_signature_header(value):
    result = verify({"X-Hub-Signature-256": value}, GH_BODY, GH_SECRET, GITHUB)
    assert_fails(result, Reason.MALFORMED_HEADER)
    assert "X-Hub-Signature-256" in result.detail


def test_custom_base64_signature_must_be_canonical_and_sized():
    headers = custom_headers(STAMPED, STAMPED_SECRET, b"x", timestamp=HOSTED_T, message_id="dlv_1")
    value = headers["X-Acme-Signature"]
    for bad in (value[:-4], value + "AAAA", value.replace("v0=", "v1="), value.rstrip("=")):
        result = verify_custom({**headers, "X-Acme-Signature": bad}, b"x", STAMPED_SECRET, STAMPED, now=HOSTED_T)
        assert_fails(result, Reason.MALFORMED_HEADER)


# ---------------------------------------------------------------- header lookup


def test_header_lookup_is_case_insensitive_on_dicts_and_multidicts():
    for name in ("x-formstep-signature", "X-FORMSTEP-SIGNATURE", "x-FormStep-signature"):
        assert verify_formstep({name: HOSTED_HEADER}, HOSTED_BODY, HOSTED_SECRET, now=HOSTED_T).ok
    proxy = CIMultiDictProxy(CIMultiDict({"WEBHOOK-ID": SW_ID, "Webhook-Timestamp": str(SW_T), "webhook-SIGNATURE": SW_SIGNATURE}))
    assert verify_standard(proxy, SW_BODY, SW_SECRET, now=SW_T).ok


def test_header_present_twice_is_malformed():
    multi = CIMultiDict()
    multi.add(FORMSTEP_SIGNATURE_HEADER, HOSTED_HEADER)
    multi.add(FORMSTEP_SIGNATURE_HEADER.lower(), HOSTED_HEADER)
    result = verify_formstep(CIMultiDictProxy(multi), HOSTED_BODY, HOSTED_SECRET, now=HOSTED_T)
    assert_fails(result, Reason.MALFORMED_HEADER)
    assert "appears 2 times" in result.detail
    plain = {FORMSTEP_SIGNATURE_HEADER: HOSTED_HEADER, FORMSTEP_SIGNATURE_HEADER.upper(): HOSTED_HEADER}
    assert_fails(verify_formstep(plain, HOSTED_BODY, HOSTED_SECRET, now=HOSTED_T), Reason.MALFORMED_HEADER)


def test_non_text_header_value_is_malformed():
    weird = {FORMSTEP_SIGNATURE_HEADER: HOSTED_HEADER.encode()}
    assert_fails(verify_formstep(weird, HOSTED_BODY, HOSTED_SECRET, now=HOSTED_T), Reason.MALFORMED_HEADER)
    ignored_key = {1: "x", FORMSTEP_SIGNATURE_HEADER: HOSTED_HEADER}
    assert verify_formstep(ignored_key, HOSTED_BODY, HOSTED_SECRET, now=HOSTED_T).ok


async def test_verifies_headers_and_body_as_received_over_http(aiohttp_client):
    """A real aiohttp server on loopback: its CIMultiDictProxy headers and raw body verify."""
    seen: list[Verification] = []

    async def receive(request: web.Request) -> web.Response:
        result = verify(request.headers, await request.read(), HOSTED_SECRET, now=HOSTED_T)
        seen.append(result)
        return web.Response(status=204 if result else 401, text="" if result else result.reason or "")

    app = web.Application()
    app.router.add_post("/hook", receive)
    client = await aiohttp_client(app)
    headers = formstep_headers(HOSTED_SECRET, HOSTED_BODY, HOSTED_T, event_id="evt_01example", event_type="request.completed")
    sent = {k.lower(): v for k, v in headers.items()}
    ok = await client.post("/hook", data=HOSTED_BODY, headers=sent)
    assert ok.status == 204
    tampered = await client.post("/hook", data=HOSTED_BODY.replace(b"true", b"false"), headers=sent)
    assert tampered.status == 401
    assert await tampered.text() == "signature_mismatch"
    assert [r.ok for r in seen] == [True, False]


# ---------------------------------------------------------------- the caller's own mistakes


def test_config_errors_raise_signing_config_error():
    with pytest.raises(SigningConfigError, match="whpk_"):
        verify_standard(sw_headers(), SW_BODY, V1A_SECRET, now=SW_T)
    with pytest.raises(SigningConfigError, match="base64"):
        verify_standard(sw_headers(), SW_BODY, "whsec_not base64!", now=SW_T)
    with pytest.raises(SigningConfigError, match="32 bytes"):
        verify_standard(sw_headers(), SW_BODY, "whpk_" + base64.b64encode(bytes(31)).decode(), now=SW_T)
    with pytest.raises(SigningConfigError, match="cannot sign"):
        sign_standard(V1A_PUBLIC, SW_ID, SW_BODY, SW_T)
    with pytest.raises(SigningConfigError, match="base64"):
        verify_custom({}, b"", "whsec_%%%", STAMPED)
    with pytest.raises(SigningConfigError, match="tolerance"):
        verify_formstep(hosted_headers(), HOSTED_BODY, HOSTED_SECRET, tolerance=-1, now=HOSTED_T)
    with pytest.raises(SigningConfigError, match="tolerance"):
        verify_formstep(hosted_headers(), HOSTED_BODY, HOSTED_SECRET, tolerance=math.inf, now=HOSTED_T)
    with pytest.raises(SigningConfigError, match="now"):
        verify_formstep(hosted_headers(), HOSTED_BODY, HOSTED_SECRET, now=math.nan)
    with pytest.raises(SigningConfigError, match="unknown scheme"):
        verify(hosted_headers(), HOSTED_BODY, HOSTED_SECRET, "github")  # type: ignore[arg-type]
    with pytest.raises(SigningConfigError, match="timestamp"):
        sign_formstep(HOSTED_SECRET, HOSTED_BODY, -1)
    with pytest.raises(SigningConfigError, match="empty"):
        sign_formstep("", HOSTED_BODY, HOSTED_T)
    with pytest.raises(SigningConfigError, match="timestamp"):
        sign_custom(STAMPED, STAMPED_SECRET, b"", message_id="dlv_1")
    with pytest.raises(SigningConfigError, match="timestamp"):
        sign_custom(GITHUB, GH_SECRET, b"", timestamp=HOSTED_T)
    assert issubclass(SigningConfigError, ValueError)


def test_body_must_be_bytes():
    with pytest.raises(TypeError, match="raw request bytes"):
        verify_formstep(hosted_headers(), HOSTED_BODY.decode(), HOSTED_SECRET, now=HOSTED_T)  # type: ignore[arg-type]
    assert verify_formstep(hosted_headers(), bytearray(HOSTED_BODY), HOSTED_SECRET, now=HOSTED_T).ok
    assert verify_formstep(hosted_headers(), memoryview(HOSTED_BODY), HOSTED_SECRET, now=HOSTED_T).ok


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"template": "{timestamp}"}, "{body} exactly once"),
        ({"template": "{body}.{body}"}, "{body} exactly once"),
        ({"template": "{nonce}.{body}"}, "{nonce} is not allowed"),
        ({"template": "{body!r}"}, "not allowed"),
        ({"template": "{body:>10}"}, "not allowed"),
        ({"template": "{body"}, "'}'"),
        ({"template": "{timestamp}.{body}"}, "timestamp_header"),
        ({"timestamp_header": "X-T"}, "timestamp_header"),
        ({"id_header": "X-Id"}, "id_header"),
        ({"signature_header": "X Sig"}, "not an HTTP header name"),
        ({"prefix": "sha256 ="}, "prefix"),
        ({"digest": "md5"}, "sha256"),
        ({"encoding": "base32"}, "hex"),
        ({"secret": "x"}, "Extra inputs"),
    ],
)
def test_custom_scheme_refuses_inconsistent_configuration(options, message):
    with pytest.raises(ValidationError, match=message.replace("{", r"\{").replace("}", r"\}")):
        CustomScheme(**{"signature_header": "X-Sig", **options})


def test_custom_scheme_literal_braces():
    braces = CustomScheme(signature_header="X-Sig", template="{{v}}{body}")
    assert braces.signed_content(b"b") == b"{v}b"


# ---------------------------------------------------------------- properties

PROPERTY_SETTINGS = settings(deadline=None, max_examples=150)
timestamps = st.integers(min_value=0, max_value=10**12)
message_ids = st.from_regex(r"[\x21-\x7e]{1,40}", fullmatch=True)
hmac_keys = st.binary(min_size=1, max_size=64).map(lambda raw: "whsec_" + base64.b64encode(raw).decode())


@st.composite
def signed_deliveries(draw: st.DrawFn) -> tuple[str | CustomScheme, str, dict[str, str], bytes, int]:
    """(scheme, verifying secret, headers, body, t) for a correctly signed delivery."""
    body = draw(st.binary(max_size=512))
    t = draw(timestamps)
    kind = draw(st.sampled_from(["formstep", "v1", "v1a", "github", "stamped"]))
    if kind == "formstep":
        secret = draw(st.text(min_size=1, max_size=80))
        return "formstep", secret, hosted_headers(sign_formstep(secret, body, t)), body, t
    if kind == "v1":
        secret = draw(hmac_keys)
        return "standard", secret, standard_headers(secret, draw(message_ids), body, t), body, t
    if kind == "v1a":
        return "standard", V1A_PUBLIC, standard_headers(V1A_SECRET, draw(message_ids), body, t), body, t
    if kind == "github":
        secret = draw(st.text(min_size=1, max_size=80))
        return GITHUB, secret, custom_headers(GITHUB, secret, body), body, t
    secret = draw(hmac_keys)
    headers = custom_headers(STAMPED, secret, body, timestamp=t, message_id=draw(message_ids))
    return STAMPED, secret, headers, body, t


@PROPERTY_SETTINGS
@given(signed_deliveries())
def test_property_signed_body_verifies(delivery):
    scheme, secret, headers, body, t = delivery
    result = verify(headers, body, secret, scheme, now=t)
    assert result.ok and result.secret_index == 0


@PROPERTY_SETTINGS
@given(signed_deliveries(), st.data())
def test_property_body_byte_mutation_fails(delivery, data):
    scheme, secret, headers, body, t = delivery
    if body:
        i = data.draw(st.integers(0, len(body) - 1))
        mutated = bytearray(body)
        mutated[i] ^= data.draw(st.integers(1, 255))
    else:
        mutated = bytearray(data.draw(st.binary(min_size=1, max_size=4)))
    assert_fails(verify(headers, bytes(mutated), secret, scheme, now=t), Reason.SIGNATURE_MISMATCH)


@PROPERTY_SETTINGS
@given(signed_deliveries(), st.data())
def test_property_header_character_mutation_fails(delivery, data):
    """Changing one character of any signed header (signature, timestamp, id) never verifies."""
    scheme, secret, headers, body, t = delivery
    name = data.draw(st.sampled_from(sorted(k for k in headers if k != "Content-Type")))
    value = headers[name]
    i = data.draw(st.integers(0, len(value) - 1))
    replacement = data.draw(st.characters().filter(lambda c: c != value[i]))
    mutated = {**headers, name: value[:i] + replacement + value[i + 1 :]}
    result = verify(mutated, body, secret, scheme, now=t)
    assert not result.ok
    assert result.reason in set(Reason) - {Reason.NO_SECRET, Reason.MISSING_HEADER}


@PROPERTY_SETTINGS
@given(signed_deliveries(), st.integers(min_value=-(10**6), max_value=10**6).filter(lambda d: d != 0))
def test_property_timestamp_change_fails(delivery, delta):
    scheme, secret, headers, body, t = delivery
    for name in ("webhook-timestamp", "X-Acme-Timestamp"):
        if name in headers and t + delta >= 0:
            result = verify({**headers, name: str(t + delta)}, body, secret, scheme, now=t + delta)
            assert_fails(result, Reason.SIGNATURE_MISMATCH)
    if scheme == "formstep" and t + delta >= 0:
        moved = headers[FORMSTEP_SIGNATURE_HEADER].replace(f"t={t},", f"t={t + delta},")
        assert_fails(verify(hosted_headers(moved), body, secret, now=t + delta), Reason.SIGNATURE_MISMATCH)


HEADER_NAMES = [
    FORMSTEP_SIGNATURE_HEADER,
    LEGACY_SIGNATURE_HEADER,
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
    "X-Hub-Signature-256",
    "X-Acme-Signature",
    "X-Acme-Timestamp",
    "X-Acme-Delivery",
]
near_miss_values = st.one_of(
    st.text(max_size=200),
    st.from_regex(r"t=[0-9]{0,20},sha256=[0-9a-fA-F]{62,66}", fullmatch=True),
    st.from_regex(r"(v1a?|v2|V1),[A-Za-z0-9+/=]{0,90}( (v1a?|v2),[A-Za-z0-9+/=]{0,90}){0,3}", fullmatch=True),
    st.from_regex(r"(sha256=|v0=)?[0-9a-fA-F+/=]{0,130}", fullmatch=True),
    st.from_regex(r"[0-9]{0,20}", fullmatch=True),
)
arbitrary_headers = st.dictionaries(
    st.one_of(st.sampled_from(HEADER_NAMES), st.sampled_from(HEADER_NAMES).map(str.upper), st.text(max_size=20)),
    near_miss_values,
    max_size=8,
)


@PROPERTY_SETTINGS
@given(
    arbitrary_headers,
    st.binary(max_size=64),
    st.sampled_from(["formstep", "standard", "github", "stamped"]),
    st.integers(0, 10**12),
)
def test_property_arbitrary_headers_only_fail_in_the_documented_way(headers, body, name, now):
    scheme, secret = {
        "formstep": ("formstep", HOSTED_SECRET),
        "standard": ("standard", [SW_SECRET, V1A_PUBLIC]),
        "github": (GITHUB, GH_SECRET),
        "stamped": (STAMPED, STAMPED_SECRET),
    }[name]
    result = verify(headers, body, secret, scheme, now=now)
    assert isinstance(result, Verification)
    assert not result.ok
    assert result.reason in set(Reason) - {Reason.NO_SECRET}
    assert result.detail

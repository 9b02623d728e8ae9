"""A delivery refused for its signature is logged once per cause and path (a sender
retrying for hours leaves one line, then one per window with the count held back), naming
the secret setting that was tried and how many secrets it holds, never a secret."""

from __future__ import annotations

import logging
import time

from connector.receiver._refusals import RefusalLog, signature_advice

from .test_receiver import (
    CB_SECRET,
    OTHER_SECRET,
    WH_SECRET,
    encode,
    envelope,
    receiver_settings,
    running,
    signed,
)

SECRETS = (CB_SECRET, WH_SECRET, OTHER_SECRET)


def warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "connector.receiver" and r.levelno == logging.WARNING]


async def test_repeated_bad_deliveries_log_one_line_per_cause_naming_the_setting(sqlite_store, caplog):
    caplog.set_level(logging.WARNING, logger="connector.receiver")
    rs = receiver_settings(webhook_secrets=[WH_SECRET, "whsec_" + "5a" * 32])
    async with running(sqlite_store, rs, store_process=False) as rx:  # every delivery refused: nothing to commit
        body = encode(envelope("evt_bad"))
        for _ in range(6):  # the sender retrying with a secret the receiver does not hold
            assert (await rx.post(body, signed(body, OTHER_SECRET), "webhooks"))[0] == 401
        for _ in range(3):  # a stale signature, a cause of its own
            assert (await rx.post(body, signed(body, WH_SECRET, t=int(time.time()) - 3600), "webhooks"))[0] == 401
        for _ in range(3):  # the callback path, tried with the other setting
            assert (await rx.post(body, signed(body, OTHER_SECRET), "callbacks"))[0] == 401
    lines = warnings(caplog)
    assert len(lines) == 3, lines
    mismatch, stale, callback = lines
    assert "/formsync/events/webhooks" in mismatch and "signature_mismatch" in mismatch
    assert "receiver.webhook_secrets (2 secrets, FORMSYNC_RECEIVER__WEBHOOK_SECRETS)" in mismatch
    assert "signingSecret the subscription was created with" in mismatch
    assert "timestamp_out_of_tolerance" in stale and "clock" in stale
    assert "receiver.callback_secrets (1 secret, FORMSYNC_RECEIVER__CALLBACK_SECRETS)" in callback
    assert "request signing secret" in callback
    text = caplog.text
    assert not any(s in text for s in SECRETS + ("5a" * 32,)), "a secret reached the log"


def test_after_the_window_one_line_carries_the_count_held_back():
    now = [0.0]
    gate = RefusalLog(window=60, clock=lambda: now[0])
    assert gate.admit("signature_mismatch", "/w") == 0
    assert [gate.admit("signature_mismatch", "/w") for _ in range(4)] == [None] * 4
    assert gate.admit("signature_mismatch", "/c") == 0  # another path is another cause
    now[0] = 61
    assert gate.admit("signature_mismatch", "/w") == 4
    assert gate.admit("signature_mismatch", "/w") is None


def test_advice_for_each_cause():
    assert "is empty" in signature_advice("no_secret", "webhooks", 0, 300)
    assert "300 s" in signature_advice("timestamp_out_of_tolerance", "callbacks", 1, 300)
    assert "receiver.scheme" in signature_advice("missing_header", "any", 2, 300)
    assert "receiver.callback_secrets and receiver.webhook_secrets (3 secrets" in \
        signature_advice("signature_mismatch", "any", 3, 300)

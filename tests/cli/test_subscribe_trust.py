"""Secrets and trust: the secrets file never loses a secret (its rule, pure, and ``subscribe
secret --secret-file`` keeping what the file holds or refusing with the file unchanged);
``check --through-service`` on a published form after ``--all-forms``; an https receiver
the sandbox does not trust said in one line, and trusted with ``formsync sandbox --ca-file``
(a real TLS receiver, a real sandbox)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from connector.config.secrets_file import SecretsFileError, file_secrets, signing_secrets, with_secrets
from pipelines.cli import app
from tests.cli.test_subscribe import FORMSYNC, LINE, World, free_port, serving
from tests.deploy.certs import make_cert

OLD, MID = "whsec_" + "a" * 64, "whsec_" + "b" * 64


def test_the_secrets_file_rule_keeps_every_secret_and_every_other_line() -> None:
    text = f"FORMSYNC_SERVICE__TOKEN=fb_x\n# a comment\nFORMSYNC_RECEIVER__WEBHOOK_SECRETS='[\"{OLD}\"]'\n"
    assert file_secrets(text) == [OLD] and file_secrets("") == []
    assert signing_secrets([OLD], [OLD, MID], ["", MID]) == [OLD, MID]
    assert with_secrets(text, [OLD, MID]) == (f"FORMSYNC_SERVICE__TOKEN=fb_x\n# a comment\n"
                                              f"FORMSYNC_RECEIVER__WEBHOOK_SECRETS='[\"{OLD}\", \"{MID}\"]'\n")
    assert with_secrets("A=1", [MID]) == f"A=1\nFORMSYNC_RECEIVER__WEBHOOK_SECRETS='[\"{MID}\"]'\n"
    with pytest.raises(SecretsFileError) as bad:
        file_secrets(f"A=1\nFORMSYNC_RECEIVER__WEBHOOK_SECRETS={OLD}\n")
    assert bad.value.line == 2 and OLD not in str(bad.value) and "not a JSON list" in bad.value.reason
    with pytest.raises(SecretsFileError, match="line 1: not a NAME=value line"):
        file_secrets("just words\n")


def _secret(secret_file: Path, *secrets: str) -> tuple[int, str, str]:
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("FORMSYNC_")}
    if secrets:
        env["FORMSYNC_RECEIVER__WEBHOOK_SECRETS"] = json.dumps(list(secrets))
    done = CliRunner().invoke(app, ["subscribe", "secret", "--secret-file", str(secret_file)], env=env)
    return done.exit_code, done.stdout, done.stderr


def test_subscribe_secret_keeps_the_secrets_already_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "webhook.env"
    path.write_text(f"FORMSYNC_SERVICE__TOKEN=fb_keep\nFORMSYNC_RECEIVER__WEBHOOK_SECRETS='[\"{OLD}\"]'\n")
    code, out, err = _secret(path)  # the old secret is not in the environment: the file has it
    assert code == 0, err
    lines = path.read_text().splitlines()
    assert lines[0] == "FORMSYNC_SERVICE__TOKEN=fb_keep" and (m := LINE.match(lines[1]))
    kept = json.loads(m.group(1))
    assert kept[0] == OLD and len(kept) == 2 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "after the 1 that exist" in err and kept[1] not in out + err
    code, _, err = _secret(path, MID)  # one more in the environment: all three kept
    assert code == 0, err
    assert json.loads(LINE.match(path.read_text().splitlines()[1]).group(1))[:3] == [*kept, MID]  # type: ignore[union-attr]


@pytest.mark.parametrize("text", [f"FORMSYNC_RECEIVER__WEBHOOK_SECRETS={OLD}\n", "not an env file\n"],
                         ids=["not-json", "not-name-value"])
def test_subscribe_secret_refuses_a_file_whose_secrets_it_cannot_know(tmp_path: Path, text: str) -> None:
    path = tmp_path / "webhook.env"
    path.write_text(text)
    code, out, err = _secret(path)
    assert code == 2 and path.read_text() == text and not out
    assert err.startswith(f"error: {path}:1: ") and "left unchanged" in err and len(err.strip().splitlines()) <= 2
    assert OLD not in err
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff")
    code, _, err = _secret(path)
    assert code == 2 and "not a text environment file" in err and path.read_bytes() == b"\x89PNG\r\n\x1a\n\x00\xff"


def test_sandbox_refuses_a_ca_file_it_cannot_use_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_text("not a certificate\n")
    for given, said in ((tmp_path / "ca.pem", "holds no PEM certificate"), (tmp_path / "none.pem", "does not exist")):
        done = CliRunner().invoke(app, ["sandbox", "--data-dir", str(tmp_path / "sb"), "--ca-file", str(given)])
        assert done.exit_code == 2 and said in done.output and "Traceback" not in done.output, done.output
    assert not (tmp_path / "sb").exists()


@pytest.mark.slow
@pytest.mark.parametrize("trusted", [False, True], ids=["untrusted", "ca-file"])
def test_an_https_receiver_is_trusted_with_the_sandboxs_ca_file(tmp_path: Path, trusted: bool) -> None:
    cert, creds = make_cert(tmp_path), tmp_path / "creds.json"
    ca = ["--ca-file", str(cert.cert)] if trusted else []
    with serving([str(FORMSYNC), "sandbox", "--port", "0", "--data-dir", str(tmp_path / "sb"),
                  "--credentials-file", str(creds), *ca], dict(os.environ), "listening"):
        c = json.loads(creds.read_text())
        pro = next(x for x in c["workspaces"] if x["plan"] == "pro")
        w = World(tmp_path, c["baseUrl"], pro["token"], pro["forms"]["Contact"], pro["id"], free_port())
        target = f"https://127.0.0.1:{w.port}/formsync/events/webhooks"
        made = w.formsync("create", "--url", target, "--form", w.form, "--event", "request_canceled")
        secret = json.loads(LINE.match(made.stdout.splitlines()[0]).group(1))[0]  # type: ignore[union-attr]
        tls = {"FORMSYNC_RECEIVER__TLS_CERT": str(cert.cert), "FORMSYNC_RECEIVER__TLS_KEY": str(cert.key)}
        with serving([str(FORMSYNC), "receive", "--port", str(w.port)], {**w.env([secret]), **tls}, "listening"):
            # This command's own signed check trusts the receiver as any client can (OpenSSL's
            # SSL_CERT_FILE, read as the process starts).
            done = subprocess.run([str(FORMSYNC), "subscribe", "check", "--url", target, "--through-service"],
                                  env={**w.env([secret]), "SSL_CERT_FILE": str(cert.cert)}, capture_output=True,
                                  text=True, timeout=120)
            if not trusted:  # and without that trust here, the same in one line
                local = subprocess.run([str(FORMSYNC), "subscribe", "check", "--url", target], env=w.env([secret]),
                                       capture_output=True, text=True, timeout=120)
                assert local.returncode == 1 and local.stderr.strip() == (
                    f"error: {target}: this machine does not trust the receiver's certificate; run it as "
                    "SSL_CERT_FILE=CA.pem formsync subscribe check ..., CA.pem the certificate of the authority "
                    "that signed the receiver's"), local.stderr
    if trusted:
        assert done.returncode == 0, done.stderr
        through = json.loads(done.stdout.splitlines()[-1])
        assert through["verified"] and through["statuses"] == [200]
        return
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith(
        f"error: {target}: the sandbox does not trust the receiver's certificate, so it could not deliver")
    assert "--ca-file" in done.stderr and "validation error" not in done.stderr + done.stdout
    assert secret not in done.stderr + done.stdout

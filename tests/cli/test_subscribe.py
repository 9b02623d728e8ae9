"""``formsync subscribe`` end to end over real HTTP: the sandbox (``formsync sandbox``) and
the receiver (``formsync receive``) as the user runs them, the subscriptions created once
and kept on a second run, the secret handed over once in the line the receiver reads,
real deliveries stored, ``check`` proving the receiver holds the secret, and a rotation
(old and new secret accepted during the switch) in which no event is lost."""

from __future__ import annotations

import json
import os
import re
import socket
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from typer.testing import CliRunner

from connector.client.webhooks import DEFAULT_EVENTS
from connector.config.secrets_file import secrets_line
from pipelines.cli import app
from pipelines.connect.subscriptions import SubscriptionError, check_target, event_type_of

FORMSYNC = Path(sys.executable).parent / "formsync"
LINE = re.compile(r"^FORMSYNC_RECEIVER__WEBHOOK_SECRETS='(\[.*\])'$")


def test_rules_said_before_anything_is_sent() -> None:
    assert event_type_of("request.completed") == "request_completed" == event_type_of("request_completed")
    with pytest.raises(SubscriptionError, match="unknown event type 'submission_done'; use one of submission_created"):
        event_type_of("submission_done")
    assert check_target("http://127.0.0.1:9/x", "http://127.0.0.1:8787")
    with pytest.raises(SubscriptionError, match="cannot reach"):
        check_target("http://127.0.0.1:9/x", "https://api.formstep.io")
    with pytest.raises(SubscriptionError, match="not an https URL"):
        check_target("http://data.example.com/x", "http://127.0.0.1:8787")
    assert secrets_line(["whsec_a", "whsec_b"]) == """FORMSYNC_RECEIVER__WEBHOOK_SECRETS='["whsec_a", "whsec_b"]'"""


@pytest.mark.parametrize("command", ["list", "create", "secret", "remove", "check"])
def test_every_subcommand_has_help_with_an_example_within_80_columns(command: str) -> None:
    res = CliRunner().invoke(app, ["subscribe", command, "-h"], env={"COLUMNS": "80"}, prog_name="formsync")
    assert res.exit_code == 0, res.output
    assert "Example: formsync subscribe" in res.output and "<bool>" not in res.output
    assert "…" not in res.output and all(len(line) <= 80 for line in res.output.splitlines())


# -- end to end ----------------------------------------------------------------------------------


@dataclass
class World:
    tmp: Path
    base_url: str
    token: str
    form: str
    workspace: str
    port: int

    @property
    def target(self) -> str:
        return f"http://127.0.0.1:{self.port}/formsync/events/webhooks"

    def env(self, secrets: list[str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FORMSYNC_")}
        env.update(FORMSYNC_SERVICE__BASE_URL=self.base_url, FORMSYNC_SERVICE__TOKEN=self.token,
                   FORMSYNC_STORE__URL=f"sqlite:///{self.tmp}/formsync.db", FORMSYNC_RECEIVER__STORE_PROCESS="false")
        if secrets is not None:
            env["FORMSYNC_RECEIVER__WEBHOOK_SECRETS"] = json.dumps(secrets)
        return env

    def formsync(self, *args: str, secrets: list[str] | None = None, code: int = 0) -> Result:
        """``formsync subscribe ARGS`` in this process (the servers are processes of their own)."""
        env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("FORMSYNC_")}
        done = CliRunner().invoke(app, ["subscribe", *args], env={**env, **self.env(secrets)}, prog_name="formsync")
        assert done.exit_code == code, done.output
        return done

    def post(self, path: str, method: str, params: dict[str, Any]) -> Any:
        import urllib.request

        req = urllib.request.Request(self.base_url + path, data=json.dumps({"method": method, "params": params})
                                     .encode(), headers={"Authorization": f"Bearer {self.token}",
                                                         "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.load(resp)["data"]

    def submit(self, link: str, name: str) -> str:
        """A respondent's submit on the share link: one submission.completed event."""
        done = self.post("/api/sandbox", "shareLinks.submit",
                         {"url": link, "answers": {"name": name, "email": f"{name.lower()}@example.com"}})
        return str(done["submissionId"])

    def stored(self, submission_ids: set[str], timeout: float = 20) -> set[str]:
        """Flush deliveries until the receiver's store holds the submissions' events."""
        deadline = time.monotonic() + timeout
        found: set[str] = set()
        while time.monotonic() < deadline:
            self.post("/api/sandbox", "deliveries.flush", {})
            db = self.tmp / "formsync.db"
            if db.exists():
                with sqlite3.connect(db) as conn:
                    found = {r[0] for r in conn.execute("SELECT id FROM formsync_submissions")}
            if submission_ids <= found:
                break
            time.sleep(0.2)
        return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(args: list[str], env: dict[str, str], ready: str) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(args, env={**env, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if ready in line:
                break
        else:
            raise AssertionError(f"{args[1]} did not start")
        yield proc
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    creds = tmp_path / "creds.json"
    with serving([str(FORMSYNC), "sandbox", "--port", "0", "--data-dir", str(tmp_path / "sandbox"),
                  "--credentials-file", str(creds)], dict(os.environ), "listening"):
        c = json.loads(creds.read_text())
        pro = next(w for w in c["workspaces"] if w["plan"] == "pro")
        yield World(tmp_path, c["baseUrl"], pro["token"], pro["forms"]["Contact"], pro["id"], free_port())


@contextmanager
def receiver(w: World, secrets: list[str]) -> Iterator[None]:
    with serving([str(FORMSYNC), "receive", "--port", str(w.port)], w.env(secrets), "listening"):
        yield


def report(done: Result) -> dict[str, Any]:
    return dict(json.loads(done.stdout.splitlines()[-1]))


@pytest.mark.slow
def test_subscribe_check_and_rotate_without_losing_an_event(world: World) -> None:
    w = world
    first = w.formsync("create", "--url", w.target, "--form", w.form)
    made = report(first)
    assert sorted(s["eventType"] for s in made["created"]) == sorted(DEFAULT_EVENTS) and not made["kept"]
    lines = first.stdout.splitlines()
    assert len(lines) == 2 and (m := LINE.match(lines[0])), "the secret is handed over once, as the receiver reads it"
    (old,) = json.loads(m.group(1))
    assert re.fullmatch(r"whsec_[0-9a-f]{64}", old) and old not in first.stderr

    again = w.formsync("create", "--url", w.target, "--form", w.form, secrets=[old])
    assert len(again.stdout.splitlines()) == 1 and not report(again)["created"] and len(report(again)["kept"]) == 5
    listed = report(w.formsync("list", "--url", w.target, secrets=[old]))
    assert len(listed["subscriptions"]) == 5 and listed["forms"] > 1  # every form looked at, one has them

    link = w.post("/api/v1", "shareLinks.create", {"formId": w.form})["url"]
    with receiver(w, [old]):
        checked = w.formsync("check", "--url", w.target, "--through-service", secrets=[old])
        signed, through = (json.loads(x) for x in checked.stdout.splitlines())
        assert signed["verified"] and through["verified"] and through["statuses"] == [200]
        a = w.submit(link, "Ada")
        assert a in w.stored({a})

    # Rotation: a new secret beside the old one, the receiver restarted with both, the
    # subscriptions made again with the new one, the old removed, then the old secret dropped.
    secret_file = w.tmp / "webhook.env"
    w.formsync("secret", "--secret-file", str(secret_file), secrets=[old])
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    both = json.loads(LINE.match(secret_file.read_text().strip()).group(1))  # type: ignore[union-attr]
    assert both[0] == old and len(both) == 2
    new = both[1]
    with receiver(w, both):
        b = w.submit(link, "Bea")  # its delivery to the old subscription may still be on its way
        rotated = report(w.formsync("create", "--url", w.target, "--form", w.form, "--rotate", secrets=both))
        assert len(rotated["created"]) == 5 and len(rotated["kept"]) == 5
        c = w.submit(link, "Cy")  # to the old and the new subscription: one event id, stored once
        assert {b, c} <= w.stored({b, c})
        gone = report(w.formsync("remove", "--url", w.target, "--superseded", secrets=both))
        assert {s["subscriptionId"] for s in gone["removed"]} == {s["subscriptionId"] for s in rotated["kept"]}
    with receiver(w, [new]):
        d = w.submit(link, "Dee")
        assert {a, b, c, d} <= w.stored({d})
        refused = w.formsync("check", "--url", w.target, secrets=[old], code=1)
        assert "answered 401 to the check signed with secret #1 of receiver.webhook_secrets" in refused.stderr
        assert old not in refused.stdout + refused.stderr
        # A subscription made with a secret the receiver does not hold: the local check
        # cannot see it, the service's own delivery does.
        other = w.post("/api/v1", "forms.list", {"workspaceId": w.workspace})["items"]
        approval = next(f["id"] for f in other if f["name"] == "Approval")
        w.post("/api/v1", "webhooks.create", {"formId": approval, "targetUrl": w.target, "provider": "n8n",
                                              "eventType": "request_canceled", "signingSecret": "whsec_" + "9" * 64})
        lost = w.formsync("check", "--url", w.target, "--through-service", "--form", approval, secrets=[new], code=1)
        assert "was answered [401" in lost.stderr and "--rotate" in lost.stderr
    events = w.post("/api/sandbox", "events.list", {"type": "submission.completed"})["items"]
    attempts = [a for e in events for d in e["deliveries"] for a in d["attempts"]]
    assert attempts and all(a["status"] == 200 for a in attempts), "no delivery was refused during the rotation"

    idle = report(w.formsync("create", "--url", w.target, "--form", w.form, "--event", "submission.abandoned",
                             "--idle-window", "1d", secrets=[new]))
    assert [(s["eventType"], s["idleWindow"]) for s in idle["created"]] == [("submission_abandoned", "1d")]
    gone = report(w.formsync("remove", "--url", w.target, secrets=[new]))
    assert len(gone["removed"]) == 7 and not w.post("/api/v1", "webhooks.list", {"formId": w.form})["items"]


@pytest.mark.slow
def test_through_service_after_all_forms_picks_a_published_form(world: World) -> None:
    w = world
    forms = w.post("/api/v1", "forms.list", {"workspaceId": w.workspace})["items"]
    assert not forms[0]["isPublished"] or any(not f["isPublished"] for f in forms)  # unpublished ones exist
    made = w.formsync("create", "--url", w.target, "--all-forms", "--event", "request_canceled")
    secret = json.loads(LINE.match(made.stdout.splitlines()[0]).group(1))[0]  # type: ignore[union-attr]
    with serving([str(FORMSYNC), "receive", "--port", str(w.port)], w.env([secret]), "listening"):
        done = w.formsync("check", "--url", w.target, "--through-service", secrets=[secret])
    through = json.loads(done.stdout.splitlines()[-1])
    assert through["verified"] and through["statuses"] == [200]
    assert next(f for f in forms if f["id"] == through["formId"])["isPublished"]

"""Secrets never leak: every ``formsync`` command runs with a known token (in
``FORMSYNC_SERVICE__TOKEN``) and known callback and webhook secrets (in the config
file), on its success paths and its error paths, and then everything they left is
searched: stdout and stderr, log output, reports, exports, the store's file and the
receiver's /metrics. The full token and secrets must appear nowhere, and neither may
any part of them longer than what is public (a token's first 11 characters are its
public prefix, shown in token lists).

To cover a new command, add a ``Case`` to ``command_cases`` (or, for a command that
serves until stopped, start it beside ``formsync receive`` in the test)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest

from tests.connector.test_receiver import CONTACT, encode, envelope, signed
from tests.forkserver import ForkServer, formsync_forks
from tests.pipelines.test_outreach import sheet_rows, write_csv

from .support import FORMSYNC, SandboxProcess, receive_process, report_figures, sandbox_process

WEBHOOK_SECRET = "whsec_" + "5eb0c4f7" * 8
SPARE_SECRET = "whsec_" + "a11ce0de" * 8  # a rotated-out callback secret, still configured
WRONG_TOKEN = "fb_" + "Wr0ngT0k3n" * 3 + "xy"  # well-formed, known, refused by the service
TOKEN_PUBLIC_PREFIX = 11
SECRET_WINDOW = 16
TIMEOUT = 120


# -- searching -------------------------------------------------------------------------------------


def fragments(value: str, *, public_prefix: int = 0, window: int = SECRET_WINDOW) -> set[str]:
    """What of ``value`` must never be seen: the value itself and every run of
    ``window`` characters (at least one past the public prefix) of it."""
    size = max(window, public_prefix + 1)
    return {value} | {value[i:i + size] for i in range(0, len(value) - size + 1)
                      if i + size > public_prefix and not value[i:i + size].startswith("whsec_")}


def leaks(text: str, needles: dict[str, set[str]]) -> list[str]:
    """The names of the secrets of which some fragment occurs in ``text``."""
    return sorted(name for name, frags in needles.items() if any(f in text for f in frags))


def readable(path: Path) -> str:
    """A file's text as a search sees it: XLSX members unzipped, Parquet cells read back,
    everything else as bytes decoded leniently."""
    raw = path.read_bytes()
    parts = [raw.decode("utf-8", errors="replace")]
    if path.suffix == ".xlsx":
        with zipfile.ZipFile(path) as z:
            parts += [z.read(n).decode("utf-8", errors="replace") for n in z.namelist()]
    elif path.suffix == ".parquet":
        parts.append(pd.read_parquet(path).to_csv())
    return "\n".join(parts)


def test_fragments_cover_the_secret_beyond_its_public_prefix() -> None:
    token = "fb_" + "A1b2C3d4E5" * 3 + "zz"
    frags = fragments(token, public_prefix=TOKEN_PUBLIC_PREFIX)
    assert token in frags and token[:TOKEN_PUBLIC_PREFIX] not in frags
    assert leaks(f"prefix {token[:11]} is fine", {"token": frags}) == []
    assert leaks(f"tail {token[5:25]} is not", {"token": frags}) == ["token"]
    assert leaks(f"x{WEBHOOK_SECRET[10:30]}x", {"webhook": fragments(WEBHOOK_SECRET)}) == ["webhook"]


# -- the commands ----------------------------------------------------------------------------------


@dataclass
class Case:
    """One command line, the exit codes it may end with, and variables to set."""

    name: str
    args: list[str]
    exit_codes: frozenset[int] = frozenset({0})
    env: dict[str, str] = field(default_factory=dict)


def command_cases(work: Path, form: str, token: str, listed: set[str], webhooks_url: str = "") -> list[Case]:
    """Every batch command with the test's configuration, success and error paths. The
    commands ``run``, ``status`` and ``demo`` are covered when this copy has them, and the
    ``subscribe`` group (to ``webhooks_url``: the configured secret signs, so none is printed;
    ``secret`` writes the secrets to a file, by design)."""
    cfg = str(work / "formsync.toml")
    out = work / "exports"
    cases = [
        # The sheet has one bad row: outreach ends with 3 (rows rejected) once the rest is sent.
        Case("outreach dry run", ["outreach", str(work / "contacts.csv"), "--form", form, "--config", cfg,
                                  "--job", "spring", "--dry-run"], frozenset({3})),
        Case("outreach", ["outreach", str(work / "contacts.csv"), "--form", form, "--config", cfg, "--job", "spring"],
             frozenset({3})),
        Case("outreach rerun", ["outreach", str(work / "contacts.csv"), "--form", form, "--config", cfg,
                                "--job", "spring"], frozenset({3})),
        Case("poll", ["poll", "--config", cfg]),
        Case("sync one form", ["sync", "--config", cfg, "--form", form, "--full"]),
        Case("sync all forms", ["sync", "--config", cfg]),
        Case("export wide csv", ["export", "--format", "csv", "--out", str(out / "wide.csv"), "--config", cfg]),
        Case("export long csv", ["export", "--format", "csv", "--table", "long", "--out", str(out / "long.csv"),
                                 "--config", cfg]),
        Case("export requests csv", ["export", "--format", "csv", "--table", "requests",
                                     "--out", str(out / "requests.csv"), "--config", cfg]),
        Case("export xlsx", ["export", "--format", "xlsx", "--table", "all", "--out", str(out / "all.xlsx"),
                             "--config", cfg]),
        Case("export parquet", ["export", "--format", "parquet", "--out", str(out / "wide.parquet"), "--config", cfg]),
        Case("sync with a refused token", ["sync", "--config", cfg, "--form", form], frozenset({1}),
             {"FORMSYNC_SERVICE__TOKEN": WRONG_TOKEN}),
        Case("outreach with a refused token", ["outreach", str(work / "contacts.csv"), "--form", form, "--config", cfg],
             frozenset({1}), {"FORMSYNC_SERVICE__TOKEN": WRONG_TOKEN}),
        Case("a secret given as text, not a list", ["receive", "--config", str(work / "bad-list.toml")],
             frozenset({2})),
        Case("a misspelled token key", ["poll", "--config", str(work / "bad-key.toml")], frozenset({2})),
        Case("the token in a JSON variable beside an unknown key", ["poll", "--config", cfg], frozenset({2}),
             {"FORMSYNC_SERVICE": json.dumps({"token": token, "tokn": token})}),
        Case("help", ["--help"]),
    ]
    for name in ("run", "status", "demo"):
        if name in listed:
            cases.append(Case(f"{name} --help", [name, "--help"]))
    if "status" in listed:
        cases.append(Case("status", ["status", "--config", cfg], frozenset({0, 1, 2})))
    if "migrate" in listed:
        cases.append(Case("migrate", ["migrate", "--config", cfg]))
    if "subscribe" in listed and webhooks_url:
        target = ["--url", webhooks_url, "--config", cfg]
        cases += [Case("subscribe create", ["subscribe", "create", "--form", form, *target]),
                  Case("subscribe create again", ["subscribe", "create", "--all-forms", *target]),
                  Case("subscribe list", ["subscribe", "list", *target]),
                  Case("subscribe check", ["subscribe", "check", *target]),
                  Case("subscribe check, refused", ["subscribe", "check", *target], frozenset({1}),
                       {"FORMSYNC_RECEIVER__WEBHOOK_SECRETS": json.dumps(["whsec_" + "11" * 32])}),
                  Case("subscribe secret", ["subscribe", "secret", "--secret-file", str(work / "webhook.env"),
                                            "--config", cfg]),
                  Case("subscribe remove", ["subscribe", "remove", *target])]
    if "deploy" in listed:  # the units name the environment file, never what it holds
        cases += [Case("deploy systemd", ["deploy", "systemd", "--config", cfg, "--out", str(work / "units")]),
                  Case("deploy nginx", ["deploy", "nginx", "--config", cfg, "--out", str(work / "site")],
                       frozenset({0, 2}))]
    if "logout" in listed:  # the token wins over a sign-in; logout with none stored says so
        cases += [Case("login --help", ["login", "--help"]), Case("logout", ["logout", "--config", cfg])]
    if "dead-letters" in listed:  # the events set aside, printed with their raw bodies
        cases.append(Case("dead-letters export", ["dead-letters", "export", "--config", cfg]))
    return cases


def listed_commands() -> set[str]:
    """The sub-commands ``formsync --help`` lists."""
    out = subprocess.run([str(FORMSYNC), "--help"], capture_output=True, text=True, timeout=TIMEOUT,
                         env={**os.environ, "COLUMNS": "200"}).stdout
    return {line.split()[1] for line in out.splitlines() if line.startswith("│ ") and len(line.split()) > 2}


# -- the run ---------------------------------------------------------------------------------------


def post(url: str, body: bytes, headers: dict[str, str]) -> int:
    req = urllib.request.Request(url, data=body, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code


@pytest.fixture
def receiver_process(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    with receive_process(tmp_path / "formsync.toml", tmp_path) as running_receiver:
        yield running_receiver


@pytest.fixture
def sandbox_proc(tmp_path: Path) -> Iterator[SandboxProcess]:
    with sandbox_process(tmp_path / "sandbox", extra_args=("--verbose",)) as sb:
        sb.helper("limits.set", {"callsPerMinute": 100_000, "createsPerMinute": 100_000})
        yield sb


@pytest.fixture
def work(tmp_path: Path, sandbox_proc: SandboxProcess) -> Path:
    pro = sandbox_proc.workspace("pro")
    (tmp_path / "formsync.toml").write_text(
        f'[service]\nbase_url = "{sandbox_proc.base_url}"\ncalls_per_minute = 10000\ncreates_per_minute = 10000\n'
        f'[receiver]\ncallback_secrets = ["{SPARE_SECRET}", "{pro["signingSecret"]}"]\n'
        f'webhook_secrets = ["{WEBHOOK_SECRET}"]\n'
        f'[store]\nurl = "sqlite:///{tmp_path / "formsync.db"}"\n'
        f'[outreach]\nreport_dir = "{tmp_path / "reports"}"\n')
    (tmp_path / "bad-list.toml").write_text(f'[receiver]\ncallback_secrets = "{pro["signingSecret"]}"\n')
    (tmp_path / "bad-key.toml").write_text(f'[service]\ntokn = "{pro["token"]}"\n')
    rows = sheet_rows(6, bad=False)
    rows[3]["topic"] = "Billing"  # one bad row: the report has content
    write_csv(tmp_path / "contacts.csv", rows)
    (tmp_path / "exports").mkdir()
    return tmp_path


@pytest.fixture
def forked(tmp_path: Path) -> Iterator[ForkServer | None]:
    """The fork server the commands run in (each in a process of its own, forked from one
    holding formsync imported), or None with ``FORMSYNC_TESTS_SUBPROCESS=1``."""
    with formsync_forks({**os.environ, "COLUMNS": "200"}, tmp_path) as server:
        yield server


@pytest.mark.slow
def test_no_command_leaks_the_token_or_a_secret(work: Path, sandbox_proc: SandboxProcess,
                                                receiver_process: tuple[subprocess.Popen[bytes], str],
                                                forked: ForkServer | None) -> None:
    sb = sandbox_proc
    pro = sb.workspace("pro")
    form = pro["forms"]["Contact"]
    proc, events_url = receiver_process
    needles = {"token": fragments(pro["token"], public_prefix=TOKEN_PUBLIC_PREFIX),
               "wrong token": fragments(WRONG_TOKEN, public_prefix=TOKEN_PUBLIC_PREFIX),
               "callback secret": fragments(pro["signingSecret"]), "spare secret": fragments(SPARE_SECRET),
               "webhook secret": fragments(WEBHOOK_SECRET)}
    env = {**os.environ, "COLUMNS": "200", "FORMSYNC_SERVICE__TOKEN": pro["token"],
           "FORMSYNC_OUTREACH__CALLBACK_URL": events_url + "/callbacks"}
    outputs: dict[str, str] = {}
    listed = listed_commands()
    assert {"sandbox", "receive", "outreach", "poll", "sync", "export"} <= listed, listed
    cases = command_cases(work, form, pro["token"], listed, events_url + "/webhooks")

    def run(case: Case) -> None:
        argv, case_env = [str(FORMSYNC), *case.args], {**env, **case.env}
        done = forked.run_bytes(argv, cwd=work, env=case_env, timeout=TIMEOUT) if forked else \
            subprocess.run(argv, capture_output=True, cwd=work, timeout=TIMEOUT, env=case_env)
        text = done.stdout.decode(errors="replace") + "\n" + done.stderr.decode(errors="replace")
        assert done.returncode in case.exit_codes, f"{case.name}: exit {done.returncode}\n{text[-2000:]}"
        outputs[f"$ formsync {case.name}"] = text

    by_name = {c.name: c for c in cases}
    for name in ("outreach dry run", "outreach"):
        run(by_name[name])
    # Deliveries to the receiver: callbacks of the outreach requests, a webhook, forgeries.
    sent = {r["externalId"]: r["id"] for r in sb.rpc("requests.list", {"formId": form, "limit": 100})["items"]
            if r.get("externalId")}
    assert len(sent) == 5, sent
    for ext in ("c-1", "c-2"):  # rows without a readonly name, so any answers go
        sb.helper("requests.complete", {"requestId": sent[ext], "answers": CONTACT})
    sb.rpc("requests.cancel", {"requestId": sent["c-5"], "reason": "Not needed"})
    sb.rpc("webhooks.create", {"formId": form, "targetUrl": events_url + "/webhooks", "provider": "zapier",
                               "signingSecret": WEBHOOK_SECRET})
    link = sb.rpc("shareLinks.create", {"formId": form})
    sb.helper("shareLinks.submit", {"url": link["url"], "answers": CONTACT})
    attempts = sb.helper("deliveries.flush")["attempts"]
    assert attempts and {a["status"] for a in attempts} == {200}, attempts
    body = encode(envelope("evt_forged"))
    assert post(events_url, body, signed(body, "whsec_" + "00" * 32)) == 401
    assert post(events_url, body, signed(body, pro["signingSecret"], int(time.time()) - 4000)) == 401
    assert post(events_url + "/webhooks", body, signed(body, pro["signingSecret"])) == 401
    base = events_url.split("/formsync", 1)[0]
    for path in ("/metrics", "/healthz", "/readyz"):
        with urllib.request.urlopen(base + path, timeout=30) as resp:
            outputs[f"GET {path}"] = resp.read().decode()
    for case in cases:
        if case.name not in ("outreach dry run", "outreach"):
            run(case)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0

    # Everything the commands left: their files (not the configuration and credentials, which
    # hold the secrets by design), the sandbox's and the receiver's logs, the store itself.
    kept = {"formsync.toml", "bad-list.toml", "bad-key.toml", "creds.json", "webhook.env"}
    sandbox_db = work / "sandbox" / "db"
    files = [p for p in work.rglob("*") if p.is_file() and p.name not in kept and sandbox_db not in p.parents]
    for p in files:
        outputs[str(p.relative_to(work))] = readable(p)
    assert {"exports/all.xlsx", "exports/wide.parquet", "reports/spring-report.csv", "receive.err",
            "sandbox/sandbox.err", "formsync.db"} <= set(outputs), sorted(outputs)
    assert "evt_" in outputs["receive.err"], "the receiver logged the events it stored"
    assert "Billing" in outputs["reports/spring-report.csv"]

    found = {name: leaks(text, needles) for name, text in outputs.items()}
    found = {k: v for k, v in found.items() if v}
    report_figures("secrets", commands_run=sum(k.startswith("$ ") for k in outputs), files_searched=len(files),
                   outputs_searched=len(outputs), characters_searched=sum(len(t) for t in outputs.values()),
                   secrets=len(needles), hits=sum(len(v) for v in found.values()))
    assert found == {}, f"secrets found: {json.dumps(found)}"


def test_a_settings_error_names_the_setting_but_never_echoes_its_value(tmp_path: Path) -> None:
    """A secret in the wrong shape or under a misspelled key is refused with the setting's
    place and what is wrong, without the value (pydantic would print it by default)."""
    from pydantic import ValidationError

    from connector.config.settings import load_settings

    bad = tmp_path / "bad.toml"
    bad.write_text(f'[receiver]\ncallback_secrets = "{WEBHOOK_SECRET}"\n[service]\ntokn = "{WRONG_TOKEN}"\n')
    with pytest.raises(ValidationError) as caught:
        load_settings(bad)
    text = str(caught.value)
    assert "receiver.callback_secrets" in text and "valid list" in text
    assert "service.tokn" in text and "Extra inputs are not permitted" in text
    assert leaks(text, {"secret": fragments(WEBHOOK_SECRET), "token": fragments(WRONG_TOKEN)}) == []

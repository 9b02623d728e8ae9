"""connector.config.settings: the documented example file, TOML plus FORMSYNC_* environment,
secrets as SecretStr that never print, and clear errors for bad settings."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel, SecretStr, ValidationError

from connector.config.settings import JobSettings, Settings, load_settings
from connector.signing import GITHUB, CustomScheme

EXAMPLE = Path(__file__).parents[2] / "config" / "formsync.example.toml"
TOKEN = "fb_live_" + "q" * 32
SECRET = "whsec_" + "ab" * 32


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No FORMSYNC_* variable of the machine leaks into a test."""
    import os

    for name in list(os.environ):
        if name.startswith("FORMSYNC_"):
            monkeypatch.delenv(name)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "formsync.toml"
    path.write_text(text)
    return path


def section_models() -> dict[str, type[BaseModel]]:
    out: dict[str, type[BaseModel]] = {"jobs": JobSettings}
    for name, field in Settings.model_fields.items():
        if name != "jobs":
            out[name] = type(field.default)
    return out


def test_the_example_documents_every_setting_field_by_field():
    text = EXAMPLE.read_text()
    undocumented = [f"{section}.{name}" for section, model in section_models().items()
                    for name in model.model_fields
                    if not re.search(rf"^\s*#?\s*({name}\s*=|\[{section}\.{name}\])", text, re.M)]
    undocumented += [f"receiver.custom.{name}" for name in CustomScheme.model_fields
                     if not re.search(rf"^#\s*{name}\s*=", text, re.M)]
    assert not undocumented, f"config/formsync.example.toml does not document: {undocumented}"


def test_the_example_loads_and_states_the_defaults():
    assert load_settings(EXAMPLE).model_dump() == Settings().model_dump()


def test_environment_wins_over_the_file(tmp_path, monkeypatch):
    path = write(tmp_path, '[service]\nbase_url = "https://file.example"\ncalls_per_minute = 100\n'
                           '[receiver]\nport = 9000\n')
    monkeypatch.setenv("FORMSYNC_SERVICE__TOKEN", TOKEN)
    monkeypatch.setenv("FORMSYNC_RECEIVER__PORT", "9100")
    monkeypatch.setenv("FORMSYNC_RECEIVER__CALLBACK_SECRETS", f'["{SECRET}", "whsec_old"]')
    monkeypatch.setenv("FORMSYNC_STORE__URL", "postgresql+psycopg://u@db/formsync")
    s = load_settings(path)
    assert s.service.base_url == "https://file.example" and s.service.calls_per_minute == 100, "file values kept"
    assert s.receiver.port == 9100, "the environment wins"
    assert s.store.url == "postgresql+psycopg://u@db/formsync"
    assert isinstance(s.service.token, SecretStr) and s.service.token.get_secret_value() == TOKEN
    assert [x.get_secret_value() for x in s.receiver.callback_secrets] == [SECRET, "whsec_old"]
    assert load_settings(path, receiver={"port": 1234}).receiver.port == 1234, "explicit overrides win over both"


def test_secrets_never_print(tmp_path, monkeypatch):
    path = write(tmp_path, f'[service]\ntoken = "{TOKEN}"\n[receiver]\nwebhook_secrets = ["{SECRET}"]\n')
    s = load_settings(path)
    assert isinstance(s.receiver.webhook_secrets[0], SecretStr)
    for text in (repr(s), str(s), s.model_dump_json(), str(s.model_dump()), repr(s.service)):
        assert TOKEN not in text and SECRET not in text


def test_a_custom_scheme_comes_from_the_file(tmp_path):
    path = write(tmp_path, '[receiver]\nscheme = "custom"\n[receiver.custom]\nname = "github"\n'
                           'signature_header = "X-Hub-Signature-256"\nprefix = "sha256="\n')
    s = load_settings(path)
    assert s.receiver.scheme == "custom" and s.receiver.custom == GITHUB


@pytest.mark.parametrize(("text", "where", "what"), [
    ("[service]\ntokn = 'x'\n", "service.tokn", "Extra inputs are not permitted"),
    ("[servce]\n", "servce", "Extra inputs are not permitted"),
    ("[receiver]\nport = 'eighty'\n", "receiver.port", "valid integer"),
    ("[receiver]\nport = 70000\n", "receiver.port", "65535"),
    ("[receiver]\nscheme = 'hmac'\n", "receiver.scheme", "'formstep', 'standard' or 'custom'"),
    ("[receiver.custom]\nsignature_header = 'X-Sig'\ntemplate = '{timestamp}.{body}'\n", "receiver.custom",
     "timestamp_header"),
    ("[service]\ncalls_per_minute = 0\n", "service.calls_per_minute", "greater than or equal to 1"),
    ("[[jobs]]\nid = 'a'\nkind = 'sync'\ncron = '* * * * *'\ninterval_seconds = 5\n", "jobs.0",
     "exactly one of cron or interval_seconds"),
    ("[[jobs]]\nid = 'a'\nkind = 'sync'\ncron = '* * * * *'\n[[jobs]]\nid = 'a'\nkind = 'poll'\ncron = '0 * * * *'\n",
     "jobs", "repeated: a"),
])
def test_bad_settings_name_the_setting_and_what_is_accepted(tmp_path, text, where, what):
    with pytest.raises(ValidationError) as info:
        load_settings(write(tmp_path, text))
    message = str(info.value)
    assert where in message and what in message, message


def test_the_database_password_comes_from_a_file(tmp_path, monkeypatch):
    from sqlalchemy.engine import make_url

    password = "s3cr/t @x%"
    (tmp_path / "db_password").write_text(password + "\n")  # as `echo` leaves it
    monkeypatch.setenv("FORMSYNC_STORE__URL", "postgresql+psycopg://formsync@db:5432/formsync")
    path = write(tmp_path, f'[store]\npassword_file = "{tmp_path / "db_password"}"\n')
    url = make_url(load_settings(path).store.url)
    assert (url.username, url.password, url.host, url.database) == ("formsync", password, "db", "formsync")


@pytest.mark.parametrize(("url", "content", "what"), [
    ("sqlite:///x.db", "pw", "a SQLite database has no password; remove password_file, or give store.url a "
                             "PostgreSQL or MySQL URL"),
    ("postgresql+psycopg://u:other@db/x", "pw", "store.url holds a password already; give it in one place: "
                                                "the URL or this file"),
    ("mysql+pymysql://u@db/x", None, "cannot read {file} (No such file or directory); give the file that holds "
                                     "the database password, readable by the user formsync runs as"),
    ("postgresql+psycopg://u@db/x", "\n", "the password in {file} is empty"),
    ("postgresql+psycopg://u@db/x", " pw\n", "the password in {file} starts with a space or tab"),
])
def test_a_password_file_that_cannot_serve_is_refused_in_words(tmp_path, url, content, what):
    file = tmp_path / "db_password"
    if content is not None:
        file.write_text(content)
    with pytest.raises(ValidationError) as info:
        load_settings(write(tmp_path, f'[store]\nurl = "{url}"\npassword_file = "{file}"\n'))
    assert [e["loc"] for e in info.value.errors()] == [("store", "password_file")]
    assert what.format(file=file) in str(info.value) and "other" not in str(info.value)


def test_a_missing_file_is_an_error_not_the_defaults(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_settings(tmp_path / "nope.toml")


def test_every_job_kind_the_settings_accept_is_one_the_scheduler_runs(tmp_path):
    """The file's `kind` and the scheduler's params table name the same kinds: a kind the
    scheduler runs (files, purge, ...) is never refused by the settings, and the settings
    accept no kind the scheduler would not know."""
    from typing import get_args

    from connector.config.settings import JobKind
    from pipelines.jobs import PARAMS

    assert set(get_args(JobKind)) == set(PARAMS)
    path = tmp_path / "formsync.toml"
    path.write_text("".join(f'[[jobs]]\nid = "{k}"\nkind = "{k}"\ninterval_seconds = 3600\n\n' for k in PARAMS))
    assert [j.kind for j in load_settings(path).jobs] == list(PARAMS)

"""Configuration: a TOML file (see ``config/formsync.example.toml``) plus ``FORMSYNC_*``
environment variables, which win over the file. Nested names use ``__``:
``FORMSYNC_SERVICE__TOKEN``, ``FORMSYNC_RECEIVER__PORT``. Secrets are SecretStr: they
never print, never log and never reach an export."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from ..signing import CustomScheme


class Section(BaseModel):
    # hide_input_in_errors: a misplaced or mistyped secret is never echoed in an error message.
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)


def check_secret_text(value: str) -> str:
    """A token or secret as given, refused when it is empty or has whitespace around it
    (a newline left by ``echo`` or a file): the service would refuse it with a puzzling
    401, or every signature would fail to verify. The message never holds the value."""
    if not value:
        raise ValueError("is empty")
    if value != value.strip():
        end = value[-1] if value[-1].isspace() else value[0]
        what = "a newline" if end in "\r\n" else "a space or tab"
        side = "ends with" if value[-1].isspace() else "starts with"
        raise ValueError(f"{side} {what}; remove it (in a shell, \"$(cat FILE)\" drops a trailing newline)")
    return value


class ServiceSettings(Section):
    """Where the Form Collection Service is and how hard to use it."""

    base_url: str = "http://127.0.0.1:8787"
    token: SecretStr | None = None
    workspace_id: str | None = None
    calls_per_minute: int = Field(120, ge=1)
    creates_per_minute: int = Field(60, ge=1)
    timeout_seconds: float = Field(30.0, gt=0)
    max_retries: int = Field(5, ge=0)

    @field_validator("token")
    @classmethod
    def _token_text(cls, v: SecretStr | None) -> SecretStr | None:
        if v is not None:
            check_secret_text(v.get_secret_value())
        return v

    @field_validator("base_url")
    @classmethod
    def _url_has_scheme(cls, v: str) -> str:
        """An address without http:// or https:// is refused here, before any call tries it."""
        scheme, sep, rest = v.partition("://")
        if not sep or scheme.lower() not in ("http", "https") or not rest.strip("/"):
            raise ValueError(f"{v!r} is not an http(s) URL; write it with its scheme, "
                             f"e.g. 'http://{v.split('://')[-1].strip('/') or '127.0.0.1:8787'}'")
        return v

    @property
    def base_url_given(self) -> bool:
        """Whether base_url was set (file or environment) rather than left at the sandbox default."""
        return "base_url" in self.model_fields_set


class ReceiverSettings(Section):
    """The receiver of signed callbacks and webhook deliveries."""

    enabled: bool = False
    host: str = "127.0.0.1"
    port: int = Field(8788, ge=0, le=65535)
    path: str = "/formsync/events"
    scheme: Literal["formstep", "standard", "custom"] = "formstep"
    # Request callbacks are signed with the workspace request signing secret; webhook
    # subscriptions with their own. Several secrets per list allow rotation.
    callback_secrets: list[SecretStr] = []
    webhook_secrets: list[SecretStr] = []
    # An environment file holding FORMSYNC_RECEIVER__WEBHOOK_SECRETS (the one
    # `formsync subscribe secret --secret-file` writes): its secrets are webhook secrets too,
    # and each receiver process re-reads it when it changes (a rotation needs no restart).
    secrets_file: Path | None = None
    tolerance_seconds: int = Field(300, ge=0)
    max_body_bytes: int = Field(1024 * 1024, ge=1024)
    # A delivery whose commit has not ended within this is answered 503 (the sender's own
    # timeout is 15 s): a database that stops answering never leaves a sender waiting.
    answer_timeout_seconds: float = Field(5.0, gt=0, le=60)
    # The most body bytes held waiting for or in a commit; beyond, 503 at once.
    max_queued_bytes: int = Field(64 * 1024 * 1024, ge=1024)
    # Group commits in a process of their own (the database work on a second core), or
    # in a worker thread of the receiver's process (false).
    store_process: bool = True
    # The scheme of senders that sign otherwise, used when scheme = "custom" ([receiver.custom]).
    custom: CustomScheme | None = None
    # Serve https with this PEM certificate (chain after it) and its unencrypted PEM key.
    tls_cert: Path | None = None
    tls_key: Path | None = None
    # Behind a reverse proxy: take the client address and scheme from the proxy's
    # X-Forwarded-For (its last address) and X-Forwarded-Proto. Off: those headers are ignored.
    trust_proxy: bool = False
    # The forms whose formsync_requests series /metrics always carries; beside them the 50
    # forms with the most requests keep theirs, and the rest are summed as form="other".
    metrics_forms: list[str] = []

    @field_validator("callback_secrets", "webhook_secrets")
    @classmethod
    def _secret_text(cls, v: list[SecretStr]) -> list[SecretStr]:
        for secret in v:
            check_secret_text(secret.get_secret_value())
        return v

    @model_validator(mode="after")
    def _queue_holds_a_body(self) -> ReceiverSettings:
        if self.max_queued_bytes < self.max_body_bytes:
            raise ValueError(f"max_queued_bytes ({self.max_queued_bytes}) is below max_body_bytes "
                             f"({self.max_body_bytes}): the largest delivery could never be held; raise it")
        return self


class StoreSettings(Section):
    """The SQL database the connector writes to: SQLite by default, PostgreSQL by URL."""

    url: str = "sqlite:///formsync.db"
    # The store's key (32 random bytes, mode 0600): what seals the secrets the store keeps.
    # Unset: formsync.key beside the SQLite database, else beside the settings file.
    key_file: Path | None = None
    # The database password, read from this file (a container platform's secret, the one the
    # database server reads too) into a PostgreSQL or MySQL url that holds none.
    password_file: Path | None = None

    @field_validator("password_file")
    @classmethod
    def _password_file_fits(cls, v: Path | None, info: ValidationInfo) -> Path | None:
        if v is not None:
            _url_without_password(info.data.get("url", ""))
            read_password(v)
        return v

    @model_validator(mode="after")
    def _password_into_url(self) -> StoreSettings:
        if self.password_file is not None:
            from sqlalchemy.engine import make_url

            url = make_url(self.url).set(password=read_password(self.password_file))
            self.url = url.render_as_string(hide_password=False)
        return self


def _url_without_password(url: str) -> None:
    """Refuse a URL ``store.password_file`` cannot complete: SQLite's, or one that holds a password."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    if url.startswith("sqlite"):
        raise ValueError("a SQLite database has no password; remove password_file, or give store.url a "
                         "PostgreSQL or MySQL URL")
    try:
        has_password = make_url(url).password is not None
    except ArgumentError:
        return  # the URL itself is refused, in its own words, where the store opens
    if has_password:
        raise ValueError("store.url holds a password already; give it in one place: the URL or this file")


def read_password(path: Path) -> str:
    """The password ``path`` holds, without the newlines that end it (as a shell's ``$(cat
    FILE)`` and the database server's own ``*_PASSWORD_FILE`` read it); a ``ValueError``
    saying why when it cannot be read, never holding the password."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else "not UTF-8 text"
        raise ValueError(f"cannot read {path} ({reason}); give the file that holds the database password, "
                         f"readable by the user formsync runs as") from None
    try:
        return check_secret_text(text.rstrip("\r\n"))
    except ValueError as e:
        raise ValueError(f"the password in {path} {e}") from None


class OutreachSettings(Section):
    delivery: Literal["none", "email"] = "none"
    callback_url: str | None = None
    # sheet column -> request param: "email", "name", "externalId", "prefill.<key>",
    # "context.<key>", "metadata.<key>", "readonly", "expiresAt", "document"; a list feeds
    # several: "Full Name" = ["name", "full_name"]
    mapping: dict[str, str | list[str]] = {}
    report_dir: Path = Path("formsync-reports")
    # addresses never sent to: this file (one per line, or a CSV with an email column), the
    # store's list (formsync campaign suppress) and, with suppress_bounced, every bounce
    suppression_file: Path | None = None
    suppress_bounced: bool = True
    # true: rows of one job may share an address (each gets its own request); by default a
    # later row with an address another row has is reported suppressed, naming that row
    allow_duplicates: bool = False

    @field_validator("mapping", mode="before")
    @classmethod
    def _targets_are_text(cls, value: Any) -> Any:
        """Each column maps to a target (text) or a non-empty list of them: one line otherwise."""
        for column, given in (value.items() if isinstance(value, dict) else ()):
            many = isinstance(given, list)
            if not (isinstance(given, str) or (many and given and all(isinstance(t, str) for t in given))):
                raise ValueError(f"{column!r} = {given!r}: a column maps to a target or a non-empty list of "
                                 f'targets, e.g. {column!r} = "name" or {column!r} = ["name", "full_name"]')
        return value


class ExportSettings(Section):
    """Where ``formsync export`` writes when it is given no ``--out``: ``out_dir/TABLE.FORMAT``
    for each of ``formats`` (or of ``--format``)."""

    out_dir: Path = Path("exports")
    formats: list[Literal["csv", "xlsx", "parquet"]] = ["csv"]


class SyncSettings(Section):
    """How a scheduled sync job (``kind = "sync"``) catches edits: a plain sync reads only
    the submissions newer than its mark, so once a form's last full read is older than
    ``full_every_hours``, the job reads its whole list again (ceil(N/100) calls for N
    submissions, paced like every call). ``formsync sync`` by hand stays incremental."""

    # A sync job reads a form's whole list again (edits included) once its last full read is this old.
    full_every_hours: float = Field(24.0, gt=0)


class DeploySettings(Section):
    """What ``formsync deploy`` writes the systemd units and the nginx site with (the
    receiver's address and path come from ``[receiver]``)."""

    user: str = "formsync"
    group: str = "formsync"
    working_dir: Path = Path("/var/lib/formsync")
    environment_file: Path = Path("/etc/formsync/formsync.env")
    command: Path | None = None  # the formsync executable; default: the one that writes the units
    stop_timeout_seconds: int = Field(120, ge=1)
    server_name: str = "data.example.com"
    listen: list[str] = ["443", "[::]:443"]
    tls_cert: Path | None = None  # default: /etc/letsencrypt/live/{server_name}/fullchain.pem
    tls_key: Path | None = None  # default: /etc/letsencrypt/live/{server_name}/privkey.pem


class LoadSettings(Section):
    """Where ``formsync load`` loads: a dlt destination (``duckdb``: ``formsync.duckdb`` in
    the working directory; ``postgres``, ``bigquery``, ``snowflake``, ``filesystem``, ...:
    credentials from dlt's own configuration) and the dataset (schema) in it. ``table_format
    = "delta"`` (with ``destination = "filesystem"``) writes Delta tables: into dlt's
    ``bucket_url`` when its configuration gives one, else ``formsync-delta/`` beside a
    SQLite store (in the working directory for a server database)."""

    destination: str = Field("duckdb", min_length=1)
    dataset: str = Field("formsync_data", min_length=1)
    table_format: Literal["delta"] | None = None


NoticeKind = Literal["job_failed", "scheduler_stopped", "outreach_stalled", "events_set_aside", "token_expiring",
                     "sign_in_lost"]


class NotifySettings(Section):
    """Where to say that something went wrong: a URL that takes a JSON POST (a chat
    channel's incoming webhook reads its ``text``), a command (the notice as JSON on its
    standard input), or both. Nothing is sent when neither is set."""

    # A chat webhook URL holds its own credential in its path: kept secret like a token.
    webhook_url: SecretStr | None = None
    command: list[str] = []
    on: list[NoticeKind] = ["job_failed", "scheduler_stopped", "outreach_stalled", "events_set_aside", "token_expiring", "sign_in_lost"]
    timeout_seconds: float = Field(10.0, gt=0)
    # ``formsync status --notify`` sends the same problems again after this long, not before.
    repeat_minutes: int = Field(60, ge=1)

    @field_validator("webhook_url")
    @classmethod
    def _url(cls, v: SecretStr | None) -> SecretStr | None:
        if v is not None:
            text = check_secret_text(v.get_secret_value())
            if not text.startswith(("https://", "http://")):
                raise ValueError("must be an http(s) URL")
        return v


# The kinds of scheduled job; each is one function of the job layer (pipelines/jobs/).
JobKind = Literal["outreach", "poll", "sync", "export", "load", "remind", "close", "files", "purge", "views"]


class JobSettings(Section):
    """A scheduled job (one of ``JobKind``) run on a cron or an interval,
    and/or each time the run of the job named by ``after`` finishes."""

    id: str = Field(min_length=1, max_length=100)
    kind: JobKind
    cron: str | None = None
    interval_seconds: int | None = Field(None, ge=1)
    after: str | None = Field(None, min_length=1)
    params: dict[str, Any] = {}
    misfire_grace_seconds: int = Field(300, ge=1)
    # An interval job first runs one interval after the scheduler starts, unless this is set:
    # then at once each time a scheduler starts (or takes over), and every interval after.
    run_at_start: bool = False

    @model_validator(mode="after")
    def _one_trigger(self) -> JobSettings:
        if self.cron is not None and self.interval_seconds is not None:
            raise ValueError(f"job {self.id!r}: give exactly one of cron or interval_seconds")
        if self.cron is None and self.interval_seconds is None and self.after is None:
            raise ValueError(f"job {self.id!r}: give one of cron, interval_seconds or after")
        if self.run_at_start and self.interval_seconds is None:
            raise ValueError(f"job {self.id!r}: run_at_start applies to an interval_seconds job; a cron job runs "
                             f"at its times, an after job when the job it follows finishes")
        return self


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FORMSYNC_", env_nested_delimiter="__", extra="forbid",
                                      hide_input_in_errors=True)

    service: ServiceSettings = ServiceSettings()
    receiver: ReceiverSettings = ReceiverSettings()
    store: StoreSettings = StoreSettings()
    outreach: OutreachSettings = OutreachSettings()
    export: ExportSettings = ExportSettings()
    load: LoadSettings = LoadSettings()
    sync: SyncSettings = SyncSettings()
    notify: NotifySettings = NotifySettings()
    deploy: DeploySettings = DeploySettings()
    jobs: list[JobSettings] = []

    @field_validator("jobs")
    @classmethod
    def _unique_ids(cls, jobs: list[JobSettings]) -> list[JobSettings]:
        ids = [j.id for j in jobs]
        dup = {i for i in ids if ids.count(i) > 1}
        if dup:
            raise ValueError(f"job ids must be unique; repeated: {', '.join(sorted(dup))}")
        return jobs

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml = settings_cls.model_config.get("toml_file")
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if toml:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml))
        return tuple(sources)


class SettingsFileError(ValueError):
    """A settings file that is not TOML: ``line`` and ``column`` (1-based) when known."""

    def __init__(self, path: Path, reason: str, line: int | None = None, column: int | None = None) -> None:
        where = f"{path}:{line}:{column}" if line is not None else str(path)
        super().__init__(f"{where}: {reason}")
        self.path, self.reason, self.line, self.column = path, reason, line, column


_TOML_AT = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")


def read_toml(file: Path) -> dict[str, Any]:
    """The TOML document in ``file``; a ``SettingsFileError`` with the line and column
    when it is not valid TOML, or not UTF-8."""
    try:
        text = file.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        line = file.read_bytes()[: e.start].count(b"\n") + 1
        raise SettingsFileError(file, "is not UTF-8 text; save it as UTF-8", line) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        msg = str(e)
        m = _TOML_AT.search(msg)
        if m is None:
            raise SettingsFileError(file, f"invalid TOML: {msg.removesuffix(' (at end of document)')}",
                                    text.count("\n") + 1) from None
        raise SettingsFileError(file, f"invalid TOML: {msg[: m.start()]}", int(m.group(1)), int(m.group(2))) from None


def load_settings(path: Path | str | None = None, **overrides: Any) -> Settings:
    """Settings from ``path`` (TOML) if given, then ``FORMSYNC_*`` variables over it,
    then ``overrides`` over both. A missing file is an error, not silently ignored; a
    file that is not TOML is a ``SettingsFileError`` naming its line and column."""
    if path is None:
        return Settings(**overrides)
    file = Path(path)
    if file.is_dir():
        raise FileNotFoundError(f"config file {file} is a directory")
    if not file.is_file():
        raise FileNotFoundError(f"config file {file} does not exist")
    read_toml(file)
    bound: type[Settings] = type("FileSettings", (Settings,), {"model_config": {**Settings.model_config, "toml_file": file}})
    return bound(**overrides)

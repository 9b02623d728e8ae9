"""``formsync subscribe list|create|secret|remove|check``: the receiver's webhook
subscriptions (``pipelines.connect.subscriptions``) from the command line. Reports are one line of
JSON on stdout; a signing secret made here is handed over once, as the line the receiver
reads (stdout, or ``--secret-file`` with mode 0600)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from .context import Context, command, print_report
from .errors import UsageError, WorkFailed
from .forms import service_forms
from .helptext import summary
from .options import ConfigOption

if TYPE_CHECKING:
    from connector.client.rpc import FormClient
    from pipelines.connect.subscriptions import ServiceCheck

T = TypeVar("T")

app = typer.Typer(no_args_is_help=True, help="The receiver's webhook subscriptions: list, create, secret, remove, "
                                             "check.")

UrlOption = Annotated[str, typer.Option("--url", help="The receiver's webhooks URL the service delivers to "
                                                      "({path}/webhooks).")]
FormsOption = Annotated[list[str] | None, typer.Option("--form", metavar="FORM_ID", help="A form id (repeatable).")]
EventsOption = Annotated[list[str] | None, typer.Option(
    "--event", metavar="EVENT", help="An event type (repeatable): submission_created, submission_updated, submission_abandoned, "
                    "request_completed, request_expired, request_canceled (or as delivered, e.g. request.completed).")]
SecretFileOption = Annotated[Path | None, typer.Option(
    help="Write the secrets line here (mode 0600, an environment file) instead of printing it; the secrets "
         "and other lines already there are kept.")]


@contextmanager
def _as_usage() -> Iterator[None]:
    """A subscription the service would refuse, said as a usage error naming the option;
    superseded subscriptions not removable yet, as work that could not be done now."""
    from pipelines.connect.subscriptions import StillDelivering, SubscriptionError

    try:
        yield
    except StillDelivering as e:
        raise WorkFailed(str(e), where=e.where) from None
    except SubscriptionError as e:
        raise UsageError(str(e), where=e.where) from None


def _with_forms(ctx: Context, forms: list[str] | None, work: Callable[[FormClient, list[str]], Awaitable[T]]) -> T:
    """Run ``work`` with the client and the form ids: ``forms``, or every form of the workspace."""
    from pipelines.connect.subscriptions import workspace_forms

    workspace = ctx.service_settings().service.workspace_id

    async def go(fc: FormClient) -> T:
        ids = list(forms) if forms else await workspace_forms(fc, workspace)
        return await work(fc, ids)

    with _as_usage(), service_forms(forms):
        return ctx.with_client(go)


def _check_writable(path: Path) -> None:
    """Refuse a ``--secret-file`` that cannot be written before anything is made."""
    if path.is_dir() or not os.access(path if path.exists() else path.parent, os.W_OK):
        raise UsageError("cannot write the secret there", where=str(path),
                         hint="give a file in a directory you can write")


def _hand_over(secrets: list[str], secret_file: Path | None, text: str, what: str) -> None:
    """Print the secrets line on stdout, or set it in ``secret_file`` (``text``, its lines
    read before, kept around it) readable by its owner only, and say so on stderr. The file
    is replaced whole or not at all."""
    from connector.config.secrets_file import secrets_line, with_secrets

    if secret_file is None:
        typer.echo(secrets_line(secrets))
        typer.echo(f"{what}: the line above is what the receiver reads", err=True)
        return
    _check_writable(secret_file)
    fd, tmp = tempfile.mkstemp(dir=secret_file.parent, prefix=f".{secret_file.name}.")  # made with mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(with_secrets(text, secrets))
        os.replace(tmp, secret_file)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    typer.echo(f"{what}: written to {secret_file}, which the receiver reads as an environment file", err=True)


def _configured(ctx: Context) -> list[str]:
    return [s.get_secret_value() for s in ctx.settings().receiver.webhook_secrets if s.get_secret_value()]


def _secrets_file(ctx: Context, given: Path | None) -> Path | None:
    """``--secret-file``, else the receiver's (``receiver.secrets_file``), which it re-reads."""
    return given if given is not None else ctx.settings().receiver.secrets_file


def _known(ctx: Context, secret_file: Path | None, *, writing: bool = True) -> tuple[list[str], str]:
    """The signing secrets that exist (the settings' and those ``secret_file`` holds, by the
    secrets file's one rule) and the file's text ("" when there is none yet). A file whose
    secrets cannot be read is a ``UsageError``, and nothing is written."""
    from connector.config.secrets_file import SecretsFileError, file_secrets, signing_secrets

    if secret_file is not None and writing:
        _check_writable(secret_file)  # refused before anything is made
    if secret_file is None or not secret_file.exists():
        return signing_secrets(_configured(ctx)), ""
    keep = "it was left unchanged, so that no secret in it is lost"
    try:
        text = secret_file.read_text(encoding="utf-8")
        return signing_secrets(file_secrets(text), _configured(ctx)), text
    except UnicodeDecodeError:
        raise UsageError(f"not a text environment file; {keep}", where=str(secret_file),
                         hint="give the environment file the receiver reads, or a new file") from None
    except OSError as e:
        raise UsageError(f"cannot read the secrets already there ({e.strerror}); {keep}", where=str(secret_file),
                         hint="run it as a user who can read the file") from None
    except SecretsFileError as e:
        raise UsageError(f"{e.reason}; its secrets cannot be known, {keep}", where=f"{secret_file}:{e.line}",
                         hint="fix that line, or give another --secret-file") from None


def list_(config: ConfigOption = None, form: FormsOption = None,
          url: Annotated[str | None, typer.Option("--url", help="Only the subscriptions to this URL.")] = None) -> None:
    """List the webhook subscriptions of the forms, without their secrets. The forms
    are every form of the workspace unless --form names some. Prints the report as JSON.

    Example: [bold]formsync subscribe list --config formsync.toml --url https://data.example.com/formsync/events/webhooks[/bold]
    """
    with command(config) as ctx:
        from pipelines.connect.subscriptions import list_subscriptions

        print_report(_with_forms(ctx, form, lambda fc, ids: list_subscriptions(fc, ids, url)))


def create(
    url: UrlOption,
    config: ConfigOption = None,
    form: FormsOption = None,
    all_forms: Annotated[bool, typer.Option("--all-forms", help="Every form of the workspace.")] = False,
    event: EventsOption = None,
    idle_window: Annotated[str | None, typer.Option(
        help="For submission_abandoned: 12h, 1d, 3d or 1w without saved changes.")] = None,
    provider: Annotated[str, typer.Option(help="zapier, make or n8n: a label the service requires; deliveries are "
                                               "the same for each.")] = "n8n",
    rotate: Annotated[bool, typer.Option("--rotate", help="Make each subscription again with the newest secret, "
                                                          "beside the old (remove them later with remove "
                                                          "--superseded).")] = False,
    secret_file: SecretFileOption = None,
) -> None:
    """Subscribe the receiver's URL to event types on the forms, keeping any that exists.
    The event types are all but submission_abandoned unless --event names some. Signs
    with the newest of receiver.webhook_secrets, or makes a secret and hands it over once.

    Example: [bold]formsync subscribe create --config formsync.toml --url https://data.example.com/formsync/events/webhooks --all-forms[/bold]
    """
    with command(config) as ctx:
        from connector.client.webhooks import new_secret
        from pipelines.connect.subscriptions import (
            SubscriptionReport,
            make_subscriptions,
            plan_subscriptions,
            wanted,
        )

        if bool(form) == all_forms:
            raise UsageError("name the forms: --form FORM_ID (repeatable) or --all-forms", where="--form")
        with _as_usage():
            want = wanted(url, event or [], provider, idle_window, ctx.service_settings().service.base_url)
        secret_file = _secrets_file(ctx, secret_file)
        known, text = _known(ctx, secret_file)
        secret = known[-1] if known else new_secret()

        async def work(fc: FormClient, ids: list[str]) -> SubscriptionReport:
            report, missing = await plan_subscriptions(fc, ids, want, rotate=rotate)
            if missing and not known:  # handed over before the first subscription signed with it
                _hand_over([secret], secret_file, text, "a new signing secret was made")
            return await make_subscriptions(fc, want, missing, secret, report)

        report = _with_forms(ctx, form, work)
        print_report(report)
        if report.kept and not known:
            typer.echo(f"{len(report.kept)} subscription(s) existed already, signed with a secret that "
                       "receiver.webhook_secrets does not hold; add --rotate to make them again with its newest",
                       err=True)
        elif rotate and report.created:
            typer.echo("once every delivery to the old subscriptions has been answered, remove them with "
                       "'formsync subscribe remove --superseded' (with the same --url)", err=True)


def secret(config: ConfigOption = None, secret_file: SecretFileOption = None) -> None:
    """Make a new signing secret and hand it over after every one that exists (the
    configured ones and those --secret-file holds), as the line the receiver reads: the
    first step of a rotation (then create --rotate). A --secret-file whose secrets cannot
    be read is refused (exit 2) and left unchanged.

    Example: [bold]formsync subscribe secret --config formsync.toml --secret-file /etc/formsync/webhook.env[/bold]
    """
    with command(config) as ctx:
        from connector.client.webhooks import new_secret

        secret_file = _secrets_file(ctx, secret_file)
        known, text = _known(ctx, secret_file)
        _hand_over([*known, new_secret()], secret_file, text,
                   f"a new signing secret was added after the {len(known)} that exist (a receiver whose "
                   "receiver.secrets_file is this file takes it within a second; then run 'formsync subscribe "
                   "create --rotate' with them)")


def remove(url: UrlOption, config: ConfigOption = None, form: FormsOption = None, event: EventsOption = None,
           superseded: Annotated[bool, typer.Option("--superseded", help="Only those a newer subscription of the "
                                                                         "same event type replaces (after --rotate); "
                                                                         "refused while the service may still hold "
                                                                         "deliveries for them.")] = False,
           force: Annotated[bool, typer.Option("--force", help="With --superseded: remove them though the service "
                                                               "may still hold deliveries for them (given up).")]
           = False) -> None:
    """Remove the subscriptions to the URL from the forms. The forms are every form of
    the workspace unless --form names some; only the event types --event names, if any.
    With --superseded, refused (exit 1, nothing removed) while the service still holds
    deliveries for them: the sandbox says which it holds; the hosted service cannot, so
    until its retry horizon (about 27.6 h) after the rotation. Prints the report as JSON.

    Example: [bold]formsync subscribe remove --config formsync.toml --url https://data.example.com/formsync/events/webhooks[/bold]
    """
    with command(config) as ctx:
        from pipelines.connect.subscriptions import remove_subscriptions, sandbox_pending

        if force and not superseded:
            raise UsageError("--force applies to --superseded only", where="--force", hint="add --superseded or "
                             "leave --force out")
        service = ctx.service_settings().service
        pending_of = sandbox_pending(service.base_url, service.token.get_secret_value() if service.token else "")
        print_report(_with_forms(ctx, form, lambda fc, ids: remove_subscriptions(
            fc, ids, url, event or [], superseded=superseded, pending_of=pending_of, force=force)))


def check(url: UrlOption, config: ConfigOption = None, form: FormsOption = None,
          through_service: Annotated[bool, typer.Option(
              "--through-service", help="Sandbox only: also have the service deliver a real request.canceled "
                                        "through a request_canceled subscription to the URL.")] = False) -> None:
    """Send the receiver a test event signed as the service signs, once per secret of
    receiver.webhook_secrets, and say whether each verified (exit 1 if one did not).
    With --through-service the sandbox also delivers a real event through a subscription.

    Example: [bold]formsync subscribe check --config formsync.toml --url https://data.example.com/formsync/events/webhooks[/bold]
    """
    with command(config) as ctx:
        import aiohttp

        from pipelines.connect.subscriptions import check_receiver, check_through_sandbox, require_sandbox

        configured = _known(ctx, ctx.settings().receiver.secrets_file, writing=False)[0]
        if through_service:
            with _as_usage():
                require_sandbox(ctx.service_settings().service.base_url)
        if not configured:
            raise UsageError("receiver.webhook_secrets is empty: nothing to sign the check with", where=ctx.where,
                             hint="set FORMSYNC_RECEIVER__WEBHOOK_SECRETS to the line 'formsync subscribe create' "
                                  "printed")
        try:
            results = ctx.run(check_receiver(url, configured))
        except aiohttp.ClientConnectorCertificateError:
            raise WorkFailed("this machine does not trust the receiver's certificate", where=url,
                             hint="run it as SSL_CERT_FILE=CA.pem formsync subscribe check ..., CA.pem the "
                                  "certificate of the authority that signed the receiver's") from None
        except aiohttp.ClientError as e:
            raise WorkFailed(f"cannot reach the receiver: {e}", where=url,
                             hint="check that it runs and that --url is its webhooks URL") from None
        for r in results:
            typer.echo(r.model_dump_json())
        refused = [r for r in results if not r.verified]
        if refused:
            first = refused[0]
            raise WorkFailed(f"the receiver answered {first.status} to the check signed with secret #{first.secret} "
                             "of receiver.webhook_secrets", where=url,
                             hint="give the receiver the same FORMSYNC_RECEIVER__WEBHOOK_SECRETS and restart it")
        if through_service:
            base_url = ctx.service_settings().service.base_url
            done = _with_forms(ctx, form, lambda fc, ids: check_through_sandbox(fc, base_url, ids, url))
            typer.echo(done.model_dump_json())
            if not done.verified:
                raise _undelivered(done, url)


def _undelivered(done: ServiceCheck, url: str) -> WorkFailed:
    """Why the service's own delivery of a check did not verify, in one line."""
    if done.untrusted():
        return WorkFailed("the sandbox does not trust the receiver's certificate, so it could not deliver",
                          where=url, hint="start the sandbox with --ca-file naming the certificate of the authority "
                                          "that signed the receiver's (for a self-signed one, the certificate itself)")
    if done.statuses and done.statuses[-1] is None:
        error = done.errors[-1] if done.errors else "no reply"
        return WorkFailed(f"the service's delivery of {done.eventId or 'the event'} got no answer: {error}",
                          where=url, hint="check that the receiver runs and that --url is its webhooks URL")
    return WorkFailed(f"the service's delivery of {done.eventId or 'the event'} was answered "
                      f"{done.statuses or 'never'}", where=url,
                      hint="the subscription was made with a secret receiver.webhook_secrets does not hold: "
                           "make it again with 'formsync subscribe create --rotate'")


for _fn in (list_, create, secret, remove, check):
    app.command(_fn.__name__.rstrip("_"), short_help=summary(_fn))(_fn)

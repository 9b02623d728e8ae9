"""``formsync erase``: remove one person's data from the store, with a receipt."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from .context import command, print_report
from .errors import ExitCode, UsageError
from .options import ConfigOption

if TYPE_CHECKING:
    from connector.store._erasure import Person
    from pipelines.lifecycle.erase import EraseReceipt


def erase(
    email: Annotated[str | None, typer.Option("--email", help="The person's address (any case).")] = None,
    external_id: Annotated[str | None, typer.Option("--external-id", help="The person's external id (the id "
                                                                          "your sheet gave their request).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only say what would be removed.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the receipt as JSON on stdout.")] = False,
    config: ConfigOption = None,
) -> None:
    """Remove one person's data from every table in one transaction: their requests and
    submissions with the answers, the events and dead letters naming them, outreach and
    campaign rows, job-run texts, the archived files no other answer uses, the lines of the
    report files formsync wrote (outreach.report_dir), dlt's load packages not yet loaded
    (the next load reads their rows again) and the partial files interrupted runs left. The address and ids stay only as keyed hashes (the
    store's key, store.key_file): no later sync, poll, callback or campaign brings the
    person back. Back the key file up with the database: without it (or with another key)
    erase, ingest and sends stop, and only restoring it keeps the erasures. Prints a receipt
    (one line per table, the files it removed or rewrote, the --since-last export names
    that had written them, and what it cannot reach: files exported earlier, the warehouse
    until the next load); nobody matched is said, exit 0. With service.token or a sign-in,
    their pending requests are canceled at the service first; one left pending (no token,
    or the service refused) is named, and the command exits 1 once the erasure is done.

    Example: [bold]formsync erase --config formsync.toml --email ada@example.com --dry-run[/bold]
    """
    with command(config) as ctx:
        person = _person(email, external_id)
        from pipelines.lifecycle.erase import WorkFolders, erase_everywhere

        store, folders = ctx.keyed_store(), WorkFolders.of(ctx.settings())
        env = ctx.job_env()

        async def erase() -> EraseReceipt:
            if env.settings.service.token is None and env.tokens is None:
                return await erase_everywhere(store, person, None, dry_run=dry_run, folders=folders)
            async with env.service(max_retries=1) as fc:
                return await erase_everywhere(store, person, fc, dry_run=dry_run, folders=folders)

        receipt = ctx.run(erase())
        for line in receipt.text():
            typer.echo(line, err=as_json)
        if as_json:
            print_report(receipt)
    if receipt.pending_requests and not dry_run:
        typer.echo(f"error: {len(receipt.pending_requests)} of their requests are still pending at the service "
                   f"(no token or sign-in, or the service refused): cancel them there (formsync campaign close, or "
                   f"requests.cancel); the erasure itself is complete", err=True)
        raise typer.Exit(int(ExitCode.FAILED))


def _person(email: str | None, external_id: str | None) -> Person:
    from connector.store._erasure import Person

    if email is not None and ("@" not in email or len(email.strip().split("@")[0]) == 0):
        raise UsageError(f"{email!r} is not an address", where="--email", hint="give the whole address, "
                         "like ada@example.com")
    if external_id is not None and not external_id.strip():
        raise UsageError("--external-id is empty", where="--external-id", hint="give the id, or leave it out")
    if not email and not external_id:
        raise UsageError("nobody to erase: give --email or --external-id", where="formsync erase",
                         hint="formsync erase --email ada@example.com")
    return Person(email=email.strip() if email else None, external_id=external_id.strip() if external_id else None)

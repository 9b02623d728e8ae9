"""``formsync login`` and ``formsync logout``: the sign-in every command, the scheduler and
the receivers use when no ``service.token`` is set (see ``pipelines.connect.login``)."""

from __future__ import annotations

from typing import Annotated

import typer

from .context import command
from .errors import UsageError
from .options import ConfigOption


def login(
    config: ConfigOption = None,
    workspace: Annotated[str | None, typer.Option(help="The workspace (id or name) you will choose on the consent "
                                                       "page; any other choice is refused and nothing stored.")]
    = None,
    no_browser: Annotated[bool, typer.Option("--no-browser", help="Print the address to open elsewhere (a server "
                                                                  "without a browser) and take the redirected "
                                                                  "address pasted back.")] = False,
    port: Annotated[int, typer.Option(help="The loopback port the browser is sent back to (0: a free one; fix it "
                                           "for an SSH tunnel: ssh -L PORT:127.0.0.1:PORT server).", min=0,
                                      max=65535)] = 0,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the consent.", min=1)] = 600.0,
) -> None:
    """Sign in to the service with OAuth (PKCE, a loopback redirect) and keep the grant in
    the store, its tokens sealed with the store's key (store.key_file, made with mode
    0600 when missing, unless erasures or a sign-in need the old one: restore it from the
    backup kept with the database). Commands, the scheduler and receivers then renew the access token
    themselves; a service.token, when set, wins.

    Example: [bold]formsync login --config formsync.toml --no-browser --port 8790[/bold]
    """
    with command(config) as ctx:
        from connector.client.grant import now_ms
        from pipelines.connect.login import LoginOptions, LoginRefused, login

        settings = ctx.settings()
        if settings.service.token is not None:
            typer.echo("warning: service.token is set: it wins over the sign-in until you remove it", err=True)
        store = ctx.store()
        path = ctx.key_file()
        key = store.key(create=True)  # made only while no erasure or sign-in needs the old one
        opts = LoginOptions(workspace=workspace, open_browser=not no_browser, port=port, paste=no_browser,
                            timeout_seconds=timeout)

        def say(line: str) -> None:
            typer.echo(line, err=True)

        try:
            done = ctx.run(login(store, settings.service.base_url, key, str(path), opts, say, clock=now_ms))
        except LoginRefused as e:
            if e.usage:
                raise UsageError(str(e), where=e.where) from None
            raise
        except OSError as e:
            from .errors import CommandError, bind_failure

            said = bind_failure(e, "--port")
            if said is None:
                raise
            raise CommandError(said.message, hint=said.hint) from None
        typer.echo(f"signed in to workspace {done.workspace_name} ({done.workspace_id}) at {done.service_url}")


def logout(config: ConfigOption = None) -> None:
    """Forget the stored sign-in (the registered client is kept for the next login).

    Example: [bold]formsync logout --config formsync.toml[/bold]
    """
    with command(config) as ctx:
        url = ctx.settings().service.base_url.rstrip("/")
        forgot = ctx.store().grants.forget(url)
        typer.echo(f"signed out of {url}" if forgot else f"no sign-in was stored for {url}")

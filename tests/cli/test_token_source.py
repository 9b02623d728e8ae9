"""One token source and one clock in every command: the stored sign-in wherever a token is
needed (the campaign page's form name, the sandbox's helpers of ``subscribe check
--through-service``), a signed-in client reading the sandbox's exact clock as a token
client does, and ``formsync status`` measuring an API token's age on the service's clock."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

from aiohttp import web
from typer.testing import CliRunner, Result

from connector.client.grant import GrantTokens
from connector.client.rpc import FormClient
from connector.config.keyfile import create_key
from connector.store import Store
from formservice.sandbox.client import HelperError
from pipelines.cli import app
from pipelines.cli.campaign import _form_name
from pipelines.cli.context import Context
from pipelines.cli.demo import WEBHOOK_PROVIDER
from pipelines.cli.errors import ExitCode, explain
from pipelines.connect.subscriptions import check_through_sandbox
from tests.conftest import Sandbox
from tests.connector.test_grant import sign_in

DAY = 24 * 3600 * 1000


async def _cli(*args: str) -> Result:
    return await asyncio.to_thread(CliRunner().invoke, app, list(args), env={"COLUMNS": "200"})


async def _signed_in(sandbox: Sandbox, tmp_path: Path) -> tuple[Store, bytes, Path]:
    """A store signed in to the sandbox (no service.token), its key beside the database."""
    db = f"sqlite:///{tmp_path}/store.db"
    cfg = tmp_path / "formsync.toml"
    cfg.write_text(f'[service]\nbase_url = "{sandbox.base_url}"\n[store]\nurl = "{db}"\n')
    store = Store(db)
    store.migrate()
    key = create_key(tmp_path / "formsync.key")
    await sign_in(sandbox, store, key)
    return store, key, cfg


async def test_a_signed_in_client_reads_the_sandbox_exact_clock_and_its_helpers(sandbox: Sandbox,
                                                                                 tmp_path: Path) -> None:
    store, key, cfg = await _signed_in(sandbox, tmp_path)
    try:
        await sandbox.helpers.clock_advance(25 * DAY + 777)
        source = GrantTokens(store, sandbox.base_url, key, key_where="formsync.key")
        async with FormClient(sandbox.base_url, source) as fc:
            before = (await sandbox.helpers.clock_get()).now_ms
            exact = await fc.service_now()  # clock.get with the grant's token: to the millisecond
            assert before <= exact <= (await sandbox.helpers.clock_get()).now_ms

        # The campaign page asks the form's name with the sign-in.
        form = sandbox.pro.forms["Contact"]
        ctx = Context(cfg)
        try:
            assert await asyncio.to_thread(_form_name, ctx, form) == "Contact"
        finally:
            ctx.close()

        # subscribe check --through-service: the sandbox's helpers take the grant's token.
        async def ok(_request: web.Request) -> web.Response:
            return web.Response(text="ok")

        target_app = web.Application()
        target_app.router.add_post("/hook", ok)
        runner = web.AppRunner(target_app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        try:
            target = f"http://127.0.0.1:{runner.addresses[0][1]}/hook"
            async with FormClient(sandbox.base_url, source) as fc:
                await fc.create_webhook(form, target, WEBHOOK_PROVIDER, event_type="request_canceled",
                                        signing_secret="whsec_" + "ab" * 32)
                done = await check_through_sandbox(fc, sandbox.base_url, [form], target)
            assert done.eventId is not None and done.verified, done
        finally:
            await runner.cleanup()
    finally:
        store.close()


def test_a_sandbox_helper_refusal_is_one_line_exit_1() -> None:
    failure = explain(HelperError("events.list", 401, {"code": "UNAUTHORIZED", "message": "no token"}))
    assert failure.code == ExitCode.FAILED and not failure.bug
    assert failure.line().startswith("error: the sandbox refused: sandbox helper events.list: 401 UNAUTHORIZED")


async def test_status_measures_the_api_token_age_on_the_service_clock(sandbox: Sandbox, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/s.db"
    cfg = tmp_path / "formsync.toml"
    cfg.write_text(f'[service]\nbase_url = "{sandbox.base_url}"\ntoken = "{sandbox.pro.token}"\n'
                   f'[store]\nurl = "{db}"\n')
    assert (await _cli("poll", "--config", str(cfg))).exit_code == 0  # the token's first use is recorded
    fresh = await _cli("status", "--config", str(cfg))
    assert "token" not in fresh.stderr and "by this machine's clock" not in fresh.stdout, fresh.output
    await sandbox.helpers.clock_advance(25 * DAY)
    aged = await _cli("status", "--config", str(cfg))
    assert aged.exit_code == ExitCode.ATTENTION, aged.output
    assert "attention: the API token expires in at most 5 days" in aged.stderr, aged.output
    metrics = await _cli("status", "--config", str(cfg), "--format", "prometheus")
    assert 'formsync_problems{kind="token_expiring"} 1.0' in metrics.stdout

    # The service does not answer: the age is by this machine's clock, and status says so.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        away = f"http://127.0.0.1:{closed.getsockname()[1]}"
    cfg.write_text(cfg.read_text().replace(sandbox.base_url, away))
    local: Any = await _cli("status", "--config", str(cfg))
    assert local.exit_code == 0 and "(its age by this machine's clock)" in local.stdout, local.output

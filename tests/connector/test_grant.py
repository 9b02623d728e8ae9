"""The grant (``connector.client.grant``): a sign-in made by approving the sandbox's consent page
over HTTP, kept sealed in the store on every database, and the token chain it gives
surviving weeks on the sandbox's clock, four processes refreshing at once, a refusal for
good, and a changed key."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from sqlmodel import select

from connector.client.grant import GrantError, GrantTokens, now_ms
from connector.client.rpc import FormClient
from connector.config.keyfile import KeyFileError, unseal
from connector.store import Store
from pipelines.connect.login import LoginOptions, LoginResult, login
from tests.spec.test_oauth import decide

DAY_MS = 24 * 3600 * 1000
TOKENS = re.compile(r"fb(o|or)?_[A-Za-z0-9]{16,}")
KEY = bytes(range(32))


async def consent(sandbox: Any, urls: asyncio.Queue[str], *, workspace: str = "Pro Workspace",
                  decision: str = "approve") -> None:
    """What the person does: open the printed address, choose, press the button, and
    let the browser follow the redirect to formsync's loopback listener."""
    url = await urls.get()
    async with sandbox.http.get(url, allow_redirects=False) as resp:
        page = await resp.text()
    status, location, body = await decide(sandbox, page, workspace=workspace, decision=decision)
    assert status == 302 and location, body
    async with sandbox.http.get(location) as resp:
        assert resp.status == 200


async def sign_in(sandbox: Any, store: Store, key: bytes = KEY, **kw: Any) -> LoginResult:
    urls: asyncio.Queue[str] = asyncio.Queue()
    said: list[str] = []

    def say(line: str) -> None:
        said.append(line)
        if "http" in line:
            urls.put_nowait(line.rsplit(" ", 1)[1])

    person = asyncio.create_task(consent(sandbox, urls, **kw))
    try:
        return await login(store, sandbox.base_url, key, "test.key", LoginOptions(open_browser=False), say,
                           clock=now_ms)
    finally:
        await person
        assert not any(t in line for line in said for t in ("fbo_", "fbor_")), said


def tokens(store: Store, url: str, key: bytes = KEY) -> tuple[str, str]:
    row = store.grants.get(url)
    assert row is not None and row.access_token and row.refresh_token
    return (unseal(key, row.access_token, f"{url}:access", "k"), unseal(key, row.refresh_token, f"{url}:refresh", "k"))


async def workspace_via(source: GrantTokens, base_url: str) -> str:
    async with FormClient(base_url, source, max_retries=0) as fc:
        return (await fc.list_workspaces())[0].id


async def test_sign_in_keeps_only_sealed_tokens_and_the_chain_lasts_40_days(migrated_db_url: str, sandbox: Any) -> None:
    with Store(migrated_db_url) as store:
        done = await sign_in(sandbox, store)
        assert done.workspace_id == sandbox.pro.id and done.workspace_name == "Pro Workspace"
        row = store.grants.get(sandbox.base_url)
        assert row is not None and row.generation == 1 and row.workspace_id == sandbox.pro.id
        for sealed in (row.access_token, row.refresh_token):
            assert sealed and b"fbo" not in sealed
        assert await workspace_via(GrantTokens(store, sandbox.base_url, KEY, key_where="k"), sandbox.base_url) \
            == sandbox.pro.id
        for day in (20, 40):  # each a new process: the stored chain, refreshed on the 401 of an expired token
            await sandbox.helpers.clock_advance(20 * DAY_MS)
            assert await workspace_via(GrantTokens(store, sandbox.base_url, KEY, key_where="k"),
                                       sandbox.base_url) == sandbox.pro.id, day
        assert store.grants.get(sandbox.base_url).generation == 3


async def test_four_processes_refresh_at_once_and_the_chain_survives(migrated_db_url: str, sandbox: Any) -> None:
    with Store(migrated_db_url) as store:
        await sign_in(sandbox, store)
        stale = tokens(store, sandbox.base_url)[0]
        await sandbox.helpers.clock_advance(2 * 3600 * 1000)  # every access token has expired
        stores = [Store(migrated_db_url) for _ in range(4)]  # four connections, as four processes have
        try:
            sources = [GrantTokens(s, sandbox.base_url, KEY, key_where="k") for s in stores]
            got = await asyncio.gather(*(workspace_via(src, sandbox.base_url) for src in sources))
            assert got == [sandbox.pro.id] * 4
            assert store.grants.get(sandbox.base_url).generation == 2, "one refresh, the others used its token"
            assert len({(await src.token()).get_secret_value() for src in sources} - {stale}) == 1
            await sandbox.helpers.clock_advance(2 * 3600 * 1000)
            assert await workspace_via(sources[0], sandbox.base_url) == sandbox.pro.id  # the chain goes on
        finally:
            for s in stores:
                s.close()


async def test_a_refresh_refused_for_good_is_said_once_and_kept(migrated_db_url: str, sandbox: Any) -> None:
    with Store(migrated_db_url) as store:
        await sign_in(sandbox, store)
        row = store.grants.get(sandbox.base_url)
        access, refresh = tokens(store, sandbox.base_url)
        # Someone spent the refresh token elsewhere (a copied database): the stored one is dead.
        async with sandbox.http.post(sandbox.base_url + "/oauth/token", data={
                "grant_type": "refresh_token", "refresh_token": refresh, "client_id": row.client_id}) as resp:
            assert resp.status == 200
        source = GrantTokens(store, sandbox.base_url, KEY, key_where="k")
        with pytest.raises(GrantError) as caught:
            await source.renew(SecretStr(access))
        assert caught.value.lost and "invalid_grant" in str(caught.value) and "formsync login" in str(caught.value)
        assert store.grants.get(sandbox.base_url).failure == "invalid_grant"
        with pytest.raises(GrantError, match="formsync login"):  # every later process says so too
            await GrantTokens(store, sandbox.base_url, KEY, key_where="k").token()


async def test_another_key_opens_nothing(tmp_path: Path, sandbox: Any) -> None:
    with Store(f"sqlite:///{tmp_path}/s.db") as store:
        store.migrate()
        await sign_in(sandbox, store)
        with pytest.raises(KeyFileError, match="changed or replaced"):
            GrantTokens(store, sandbox.base_url, os.urandom(32), key_where="k")
        assert store.grants.forget(sandbox.base_url) and not store.grants.forget(sandbox.base_url)
        with pytest.raises(GrantError, match="formsync login"):
            GrantTokens(store, sandbox.base_url, KEY, key_where="k")


# A process that uses the stored grant with an expired access token, killed (SIGKILL) at
# one point of its refresh: holding the lock before the token endpoint is called, after the
# new pair is committed, during the call that follows, or in the one unsafe instant between
# the token endpoint's answer and the commit.
CHILD = r"""
import asyncio, os, signal, sys
from connector.client import oauth
from connector.client import FormClient
from connector.client.grant import GrantTokens
from connector.store import Store
from connector.store._grants import GrantRows

url, base, point = sys.argv[1:4]

def die():
    os.kill(os.getpid(), signal.SIGKILL)

async def killed(*args, **kwargs):
    die()

if point == "before_call":
    oauth.token_call = killed
elif point in ("after_commit", "after_answer"):
    save = GrantRows.save_tokens
    def save_then_die(self, *args):
        if point == "after_commit":
            save(self, *args)
        die()
    GrantRows.save_tokens = save_then_die
elif point == "next_call":
    send, sent = FormClient._send, []
    async def send_then_die(self, *args):
        sent.append(1)
        if len(sent) == 2:  # the call after the refresh, killed while it is under way
            asyncio.ensure_future(send(self, *args))
            await asyncio.sleep(0.02)
            die()
        return await send(self, *args)
    FormClient._send = send_then_die

async def main():
    with Store(url) as store:
        source = GrantTokens(store, base, bytes(range(32)), key_where="k", lock_ttl_seconds=1)
        async with FormClient(base, source, max_retries=0) as fc:
            await fc.list_workspaces()

asyncio.run(main())
"""


async def killed_at(point: str, db_url: str, sandbox: Any) -> str:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", CHILD, db_url, sandbox.base_url, point,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == -signal.SIGKILL, (point, err.decode())
    return out.decode() + err.decode()


@pytest.mark.slow
@pytest.mark.parametrize("db_url", ["sqlite", "postgresql"], indirect=True)  # a lease row; a session lock
async def test_a_kill_at_any_point_but_one_leaves_a_usable_chain(migrated_db_url: str, sandbox: Any) -> None:
    with Store(migrated_db_url) as store:
        await sign_in(sandbox, store)
        for point in ("before_call", "after_commit", "next_call"):
            await sandbox.helpers.clock_advance(2 * 3600 * 1000)  # the stored access token has expired
            before = store.grants.get(sandbox.base_url).generation
            said = await killed_at(point, migrated_db_url, sandbox)
            assert not TOKENS.search(said), said
            after = store.grants.get(sandbox.base_url).generation
            assert after == before + (point != "before_call"), point
            with Store(migrated_db_url) as other:  # the next process: the stored chain still works
                source = GrantTokens(other, sandbox.base_url, KEY, key_where="k", lock_wait_seconds=10)
                assert await workspace_via(source, sandbox.base_url) == sandbox.pro.id, point
        # The one instant that cannot be made safe: the answer spent the refresh token, the
        # commit never came. The next refresh is refused for good, and that is recorded.
        await sandbox.helpers.clock_advance(2 * 3600 * 1000)
        await killed_at("after_answer", migrated_db_url, sandbox)
        with pytest.raises(GrantError, match="invalid_grant.*formsync login"):
            await workspace_via(GrantTokens(store, sandbox.base_url, KEY, key_where="k", lock_wait_seconds=10),
                                sandbox.base_url)
        assert store.grants.get(sandbox.base_url).failure == "invalid_grant"


async def test_the_client_is_registered_once_and_again_when_the_service_removed_it(tmp_path: Path,
                                                                                  sandbox: Any) -> None:
    from formservice.tables import OAuthClient, OAuthCode, RefreshToken

    with Store(f"sqlite:///{tmp_path}/s.db") as store:
        store.migrate()
        await sign_in(sandbox, store)
        first = store.grants.get(sandbox.base_url).client_id
        await sign_in(sandbox, store)
        assert store.grants.get(sandbox.base_url).client_id == first  # kept, not registered again
        with sandbox.service.session() as s:  # the service collects the client (and what it held)
            for table in (RefreshToken, OAuthCode):
                for row in s.exec(select(table).where(table.client_id == first)).all():
                    s.delete(row)
            s.delete(s.get(OAuthClient, first))
            s.commit()
        done = await sign_in(sandbox, store)
        again = store.grants.get(sandbox.base_url)
        assert again.client_id != first and again.generation == 3 and done.workspace_id == sandbox.pro.id


# A process that uses the stored grant once (its access token expired), as a command does.
USER = r"""
import asyncio, sys
from connector.client import FormClient
from connector.client.grant import GrantTokens
from connector.store import Store

url, base = sys.argv[1:3]

async def main():
    with Store(url) as store:
        source = GrantTokens(store, base, bytes(range(32)), key_where="k", lock_wait_seconds=30)
        async with FormClient(base, source, max_retries=0) as fc:
            print((await fc.list_workspaces())[0].id)

asyncio.run(main())
"""


@pytest.mark.slow  # four Python processes started at once
async def test_four_os_processes_refresh_at_once_and_the_chain_survives(migrated_db_url: str, sandbox: Any) -> None:
    with Store(migrated_db_url) as store:
        await sign_in(sandbox, store)
        await sandbox.helpers.clock_advance(2 * 3600 * 1000)  # every process finds its access token expired
        procs = [await asyncio.create_subprocess_exec(sys.executable, "-c", USER, migrated_db_url, sandbox.base_url,
                                                      stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
                 for _ in range(4)]
        done = await asyncio.wait_for(asyncio.gather(*(p.communicate() for p in procs)), 120)
        for p, (out, err) in zip(procs, done, strict=True):
            assert p.returncode == 0 and out.decode().strip() == sandbox.pro.id, err.decode()[-2000:]
            assert not TOKENS.search(out.decode() + err.decode())
        assert store.grants.get(sandbox.base_url).generation == 2, "one refresh; the others used its token"
        await sandbox.helpers.clock_advance(2 * 3600 * 1000)
        source = GrantTokens(store, sandbox.base_url, KEY, key_where="k")
        assert await workspace_via(source, sandbox.base_url) == sandbox.pro.id, "the chain goes on"


def test_processes_noting_a_static_tokens_use_at_once_all_succeed(migrated_db_url: str) -> None:
    """Jobs that start together each record the static token's use: the one row is made
    once, its first use kept, and no job fails on the race (a unique key refused before)."""
    import threading

    stores = [Store(migrated_db_url) for _ in range(8)]
    start, failures, firsts = threading.Barrier(8), [], []

    def note(s: Store) -> None:
        start.wait()
        try:
            firsts.append(s.grants.note_token_use("fp_1", "api"))
        except Exception as e:  # the failure this test is about
            failures.append(repr(e))

    try:
        threads = [threading.Thread(target=note, args=(s,)) for s in stores]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert failures == [] and len(firsts) == 8
        assert len(set(firsts)) == 1 and stores[0].grants.token_first_used("fp_1") == firsts[0]
    finally:
        for s in stores:
            s.close()

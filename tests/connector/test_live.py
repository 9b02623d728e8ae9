"""Read-only client checks that run on the sandbox always, and on the hosted service too
when FORMSYNC_LIVE_BASE_URL and FORMSYNC_LIVE_TOKEN are set (``-m live`` selects them).
They create nothing and change nothing, so any workspace's token will do."""

from __future__ import annotations

import logging
import traceback

import pytest

from connector import errors, models
from connector.client.rpc import FormClient

from .conftest import Target

pytestmark = pytest.mark.live


def assert_no_token(target: Target, texts: list[str]) -> None:
    for text in texts:
        assert target.token not in text, f"the token leaked into: {text[:200]}"


async def test_identity_and_every_typed_method_is_offered(target):
    async with FormClient(target.base_url, target.token) as fc:
        me = await fc.me()
        workspaces = await fc.list_workspaces()
        offered = await fc.list_methods()
    assert me.id and "@" in me.email
    assert len(workspaces) == 1 and workspaces[0].id.startswith("ws_"), "a token acts in exactly one workspace"
    missing = set(FormClient.API_METHODS) - set(offered.methods)
    assert not missing, f"the client types methods the service does not offer: {sorted(missing)}"


async def test_forms_pages_follow_cursors_without_repeats(target):
    async with FormClient(target.base_url, target.token) as fc:
        [ws] = await fc.list_workspaces()
        paged = [f async for f in fc.iter_forms(ws.id, limit=2)]
        whole = await fc.list_forms(ws.id, limit=100)
    ids = [f.id for f in paged]
    assert len(ids) == len(set(ids)), "no form comes twice across pages"
    assert all(isinstance(f, models.Form) and f.workspaceId == ws.id for f in paged)
    assert [f.createdAt for f in paged] == sorted((f.createdAt for f in paged), reverse=True), "newest first"
    if not whole.hasMore:
        assert ids == [f.id for f in whole.items], "pages of 2 give the same list as one page"


async def test_fields_and_a_submissions_page_of_a_published_form(target):
    async with FormClient(target.base_url, target.token) as fc:
        [ws] = await fc.list_workspaces()
        form = None
        async for f in fc.iter_forms(ws.id, limit=50):
            if f.isPublished:
                form = f
                break
        if form is None:
            pytest.skip(f"{target.name}: the workspace has no published form to read")
        fields = await fc.list_fields(form.id)
        page = await fc.list_submissions(form.id, limit=2)
    keys = [f.key for f in fields.items]
    assert fields.published and len(keys) == len(set(keys)), "field keys are unique"
    assert isinstance(page, models.SubmissionPage) and page.formId == form.id and len(page.items) <= 2
    assert not page.hasMore or page.nextCursor, "more pages come with a cursor"
    assert all(s.id.startswith("sub_") for s in page.items)


async def test_failures_are_typed_and_never_show_the_token(target, caplog):
    caplog.set_level(logging.DEBUG)
    raised: list[BaseException] = []
    async with FormClient(target.base_url, target.token) as fc:
        with pytest.raises(errors.NotFound) as missing:
            await fc.get_request("req_" + "0" * 22)
        raised.append(missing.value)
        assert missing.value.code == "NOT_FOUND" and missing.value.status == 404 and missing.value.message
    async with FormClient(target.base_url, "fb_not_a_real_token_" + "x" * 20, max_retries=0) as bad:
        with pytest.raises(errors.Unauthorized) as refused:
            await bad.me()
        raised.append(refused.value)
    assert refused.value.status == 401
    texts = [r.getMessage() for r in caplog.records]
    for exc in raised:
        texts += [str(exc), repr(exc), "".join(traceback.format_exception(exc))]
    assert_no_token(target, texts)

"""`formsync sandbox --seed-from URL` and `formsync sandbox diff --upstream URL`, with a
second sandbox as the real workspace: a form with every field type built through the editor
tools is copied with its id, the diff finds no difference, and a field changed upstream is
named by the diff. No token reaches any output."""

from __future__ import annotations

import asyncio
import os

import pytest

from pipelines.connect.seed_from import mask_email

from .mcp.test_mcp_endpoint import agent
from .test_cli_sandbox import FORMSYNC, sandbox_process

EVERY_TYPE = [
    ("editor_insertTextQuestion", {"title": "Company", "key": "company", "required": True}),
    ("editor_insertContactQuestion", {"title": "Email", "key": "email"}),
    ("editor_insertNumberQuestion", {"title": "Employees", "key": "employees"}),
    ("editor_insertRadioQuestion", {"title": "Size", "key": "size", "options": [{"label": "S", "key": "s"}]}),
    ("editor_insertCheckboxQuestion", {"title": "Markets", "key": "markets", "options": [{"label": "EU"}]}),
    ("editor_insertSelectQuestion", {"title": "Tier", "key": "tier", "options": [{"label": "A", "key": "a"}]}),
    ("editor_insertRatingQuestion", {"title": "Rating", "key": "rating", "maxStars": 4}),
    ("editor_insertLinearScaleQuestion", {"title": "Fit", "key": "fit", "min": 1, "max": 5}),
    ("editor_insertMatrixQuestion", {"title": "Service", "key": "service", "rows": [{"label": "Speed", "key": "sp"}],
                                     "columns": [{"label": "Good", "key": "good"}]}),
    ("editor_insertFileQuestion", {"title": "Certificate", "key": "certificate"}),
    ("editor_insertHiddenField", {"title": "Account", "key": "account"}),
    ("editor_insertCalculatedField", {"title": "Seats", "key": "seats", "formula": "employees * 2"}),
    ("editor_insertRepeatingGroup", {"title": "Sites", "key": "sites", "members": [
        {"type": "text", "title": "City", "key": "city"}]}),
    ("editor_insertDecisionQuestion", {}),
]


async def _diff(upstream: str, creds: os.PathLike[str] | None) -> tuple[int, str]:
    """``formsync sandbox diff`` against the sandbox of ``creds`` (None: one it seeds itself)."""
    against = ["--sandbox-credentials", str(creds)] if creds is not None else []
    proc = await asyncio.create_subprocess_exec(
        str(FORMSYNC), "sandbox", "diff", "--upstream", upstream, *against,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode() + err.decode()


async def test_a_workspace_seeded_from_upstream_answers_in_its_shape_until_a_field_changes(
        sandbox, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    await sandbox.helpers.limits_set(calls_per_minute=1000)
    token = sandbox.pro.token
    async with agent(sandbox) as a:
        form = (await a.ok("form_create", {"workspaceId": sandbox.pro.id, "name": "Every type"}))["id"]
        for tool, args in EVERY_TYPE:
            await a.ok(tool, {"formId": form, **args})
        await a.ok("form_publish", {"formId": form})
    monkeypatch.setenv("FORMSYNC_SERVICE__TOKEN", token)
    creds = tmp_path / "creds.json"
    async with sandbox_process(tmp_path / "copy", creds, "--seed-from", sandbox.base_url) as run:
        copied = run.creds["workspaces"][0]
        assert copied["forms"]["Every type"] == form, "the form keeps its id"
        code, said = await _diff(sandbox.base_url, creds)
        assert code == 0, said
        assert "0 of " in said and "fields.list 'Every type': same shape" in said
        code, own = await _diff(sandbox.base_url, None)
        assert code == 0 and "0 of " in own, own

        async with agent(sandbox) as a:  # upstream, a field becomes another type
            doc = await a.ok("editor_getDocument", {"formId": form})
            size = next(e for e in doc["elements"] if e.get("key") == "size")
            await a.ok("editor_deleteElement", {"formId": form, "elementId": size["id"]})
            await a.ok("form_publish", {"formId": form})
        code, changed = await _diff(sandbox.base_url, creds)
        assert code == 1, changed
        assert "fields.list 'Every type':" in changed and "items[3]" in changed
        run.proc.kill()
        await run.proc.wait()
        banner = run.banner + (await run.proc.stdout.read()).decode() + (await run.proc.stderr.read()).decode()
    for text in (said, own, changed, banner, (tmp_path / "copy" / "seed-from.yaml").read_text()):
        assert token not in text and copied["token"] not in text


async def test_submissions_come_only_when_asked_with_their_emails_masked(
        sandbox, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    await sandbox.helpers.limits_set(calls_per_minute=1000)
    monkeypatch.setenv("FORMSYNC_SERVICE__TOKEN", sandbox.pro.token)
    async with sandbox_process(tmp_path / "copy", tmp_path / "creds.json", "--seed-from", sandbox.base_url,
                               "--with-submissions") as run:
        run.proc.kill()
        await run.proc.wait()
        said = (await run.proc.stderr.read()).decode()
    seed = (tmp_path / "copy" / "seed-from.yaml").read_text()
    assert "read-only calls" in said and "not copied: themes" in said
    assert "grace@example.test" not in seed and mask_email("grace@example.test") in seed
    assert "Grace Hopper" in seed, "other answers are copied as they are"
    async with sandbox_process(tmp_path / "plain", tmp_path / "creds2.json", "--seed-from", sandbox.base_url) as run:
        run.proc.kill()
        await run.proc.wait()
    assert "Grace Hopper" not in (tmp_path / "plain" / "seed-from.yaml").read_text()

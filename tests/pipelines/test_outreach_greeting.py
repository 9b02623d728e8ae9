"""Whom an invitation greets: a name column matched by its header greets the recipient
(and fills no field), a mapping's list feeds several targets, the dry run warns when
invitations would greet nobody, and a wrong ``outreach.mapping`` is one line. The rules
on fixed inputs; the command against a real sandbox over loopback HTTP."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from connector.models import FieldDescriptor
from pipelines.cli import app
from pipelines.outreach.checks import mapping_problem
from pipelines.outreach.columns import column_targets, validate_row
from tests.conftest import Sandbox

FIELDS = [FieldDescriptor(key="full_name", type="text", title="Full name", prefillable=True),
          FieldDescriptor(key="email", type="email", title="Email", prefillable=True)]
BY_KEY = {f.key: f for f in FIELDS}
ROW = {"E-mail": "ada@example.test", "Full Name": "Ada Lovelace"}


def test_a_name_column_matched_by_its_header_greets_the_recipient_and_fills_no_field() -> None:
    assert column_targets("Full Name", BY_KEY, {}) == ("name",)
    params, problems = validate_row(FIELDS, ROW)
    assert problems == [] and params is not None
    assert (params.recipient, params.prefill) == ({"email": "ada@example.test", "name": "Ada Lovelace"},
                                                  {"email": "ada@example.test"})


def test_a_mapping_list_feeds_every_target_it_names() -> None:
    mapping = {"full name": ["name", "full_name"]}
    assert column_targets("Full Name", BY_KEY, mapping) == ("name", "prefill.full_name")
    params, problems = validate_row(FIELDS, ROW, mapping=mapping)
    assert problems == [] and params is not None
    assert (params.recipient["name"], params.prefill["full_name"]) == ("Ada Lovelace", "Ada Lovelace")
    # a bad cell feeding two targets is one problem
    params, problems = validate_row(FIELDS, {"Mail": "not-an-address"}, mapping={"Mail": ["email", "prefill.email"]})
    assert params is None and [p.column for p in problems] == ["Mail"]


def test_a_wrong_mapping_list_is_one_line_naming_the_setting() -> None:
    wrong = mapping_problem({"Full Name": ["name", "ful_name"]}, FIELDS, "outreach.mapping")
    assert wrong is not None and "\n" not in wrong
    assert wrong.startswith("outreach.mapping: 'Full Name' = 'ful_name': 'ful_name' is not a mapping target")


def _config(tmp_path: Path, sandbox: Sandbox, mapping: str) -> Path:
    path = tmp_path / "formsync.toml"
    path.write_text(f'[service]\nbase_url = "{sandbox.base_url}"\ntoken = "{sandbox.pro.token}"\n'
                    f'calls_per_minute = 10000\ncreates_per_minute = 10000\n'
                    f'[store]\nurl = "sqlite:///{tmp_path}/store.db"\n'
                    f'[outreach]\ndelivery = "email"\nreport_dir = "{tmp_path}"\n{mapping}\n')
    return path


async def _formsync(*args: str) -> Any:
    return await asyncio.to_thread(CliRunner().invoke, app, list(args), env={"COLUMNS": "400"})


async def test_the_dry_run_warns_when_invitations_would_greet_nobody_and_a_list_greets(
        sandbox: Sandbox, tmp_path: Path) -> None:
    assert (await sandbox.helper("limits.set", {"callsPerMinute": 10000, "createsPerMinute": 10000})).ok
    form = sandbox.pro.forms["Everything"]
    sheet = tmp_path / "people.csv"
    sheet.write_text("externalId,E-mail,Full Name\ng-1,ada@example.test,Ada Lovelace\ng-2,bo@example.test,Bo Li\n")

    def outreach(config: Path, *more: str) -> Any:
        return _formsync("outreach", str(sheet), "--form", form, "--job", "greet", "--config", str(config), *more)

    nameless = await outreach(_config(tmp_path, sandbox, 'mapping = { "Full Name" = "full_name" }'), "--dry-run")
    assert nameless.exit_code == 0, nameless.output
    assert ('warning: 2 of 2 invitations would greet nobody (no recipient name); map a column to name too: '
            '[outreach] mapping = { "Full Name" = ["name", "full_name"] }') in nameless.stdout.splitlines()

    both = _config(tmp_path, sandbox, 'mapping = { "Full Name" = ["name", "full_name"] }')
    dry = await outreach(both, "--dry-run")
    assert dry.exit_code == 0 and "greet nobody" not in dry.output, dry.output
    sent = await outreach(both)
    assert sent.exit_code == 0, sent.output
    await sandbox.helpers.clock_advance(60_000)  # the invitations go out
    mail = (await sandbox.helper("mail.list", {"to": "ada@example.test"})).data["items"]
    assert [m["body"].splitlines()[0] for m in mail if m["kind"] == "invitation"] == ["Hello Ada Lovelace,"]
    listed = (await sandbox.rpc("requests.list", {"formId": form, "externalId": "g-1"})).data["items"]
    got = (await sandbox.rpc("requests.get", {"requestId": listed[0]["id"]})).data
    assert (got["recipient"]["name"], got["prefill"]["full_name"]) == ("Ada Lovelace", "Ada Lovelace")


async def test_a_mapping_value_of_the_wrong_type_is_one_line_with_its_place(sandbox: Sandbox,
                                                                            tmp_path: Path) -> None:
    sheet = tmp_path / "people.csv"
    sheet.write_text("E-mail,Full Name\nada@example.test,Ada Lovelace\n")
    for value, shown in (("3", "3"), ("[]", "[]"), ('["name", 4]', "['name', 4]")):
        config = _config(tmp_path, sandbox, f'mapping = {{ "Full Name" = {value} }}')
        done = await _formsync("outreach", str(sheet), "--form", sandbox.pro.forms["Everything"], "--config",
                               str(config), "--dry-run")
        lines = done.stderr.strip().splitlines()
        assert done.exit_code == 2 and len(lines) <= 2, done.output
        assert lines[0].startswith("error: ") and lines[0].endswith(
            f"formsync.toml:11: outreach.mapping: 'Full Name' = {shown}: a column maps to a target "
            """or a non-empty list of targets, e.g. 'Full Name' = "name" or 'Full Name' = ["name", "full_name"]"""), lines
        assert "Traceback" not in done.output and sandbox.pro.token not in done.output

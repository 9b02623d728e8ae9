"""The jobs of ``formsync run``, checked before anything starts: each job's params (its
kind's model, ``pipelines.jobs.params``), its trigger, and a one-line summary of what a
run did. Pure functions: no I/O here."""

from __future__ import annotations

import hashlib
import json
import tomllib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger
from pydantic import BaseModel, ValidationError

from connector.config.settings import JobSettings, Settings

from ..jobs.params import PARAMS, CloseParams, ExportParams, JobParams, OutreachParams
from ..rules.names import SLUG_RULE, name_problem

# Jobs that talk to the service and so need [service] token.
NEEDS_TOKEN = frozenset({"outreach", "poll", "sync", "remind", "close", "purge"})


class ConfigError(ValueError):
    """A configuration the scheduler refuses: the message names the job and the key."""


def _accepted(model: type[JobParams]) -> str:
    req = [n for n, f in model.model_fields.items() if f.is_required()]
    opt = [n for n, f in model.model_fields.items() if not f.is_required()]
    return f"required: {', '.join(req) or 'none'}; optional: {', '.join(opt) or 'none'}"


def parse_params(job: JobSettings) -> JobParams:
    """The job's params as its kind's model, or a ``ConfigError`` naming the job, the
    param and what is accepted."""
    model = PARAMS[job.kind]
    try:
        params = model.model_validate(job.params)
    except ValidationError as e:
        err = e.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or "params"
        if err["type"] == "missing":
            what = f"missing param {key!r}"
        elif err["type"] == "extra_forbidden":
            what = f"unknown param {key!r}"
        else:
            what = f"param {key!r}: {err['msg']} (got {err.get('input')!r})"
        raise ConfigError(f"job {job.id!r} ({job.kind}): {what}; {_accepted(model)}") from None
    if isinstance(params, CloseParams) and params.at is None:
        raise ConfigError(f"job {job.id!r} (close): missing param 'at'; required: job, at; optional: reason, dry_run "
                          f"(a scheduled close runs from that time on)")
    if isinstance(params, ExportParams):
        fmt = params.format or (params.out.suffix.lower().lstrip(".") if params.out is not None else None)
        if params.table == "all" and fmt != "xlsx":
            raise ConfigError(f"job {job.id!r} (export): param 'table' = 'all' writes one sheet per table "
                              f"and needs format 'xlsx', got {fmt!r}")
        if params.status is not None and params.table not in ("requests", "all"):
            raise ConfigError(f"job {job.id!r} (export): param 'status' filters requests: use it with table "
                              f"'requests' or 'all', not {params.table!r}")
        if params.since is not None and params.since_last is not None:
            raise ConfigError(f"job {job.id!r} (export): params 'since' and 'since_last' exclude each other: "
                              f"drop 'since'")
        _check_export_names(job, params)
    if isinstance(params, OutreachParams) and params.job is not None and (why := name_problem(params.job)):
        raise ConfigError(f"job {job.id!r} (outreach): param 'job': {why}; a job name is {SLUG_RULE}")
    return params


def _check_export_names(job: JobSettings, params: ExportParams) -> None:
    """An export job's ``out`` template and ``since_last`` name, or a ``ConfigError``."""
    from pipelines.export.nightly import refuse_load_name
    from pipelines.export.write import check_out_template

    try:
        if params.out is not None:
            check_out_template(params.out, incremental=params.since_last is not None)
    except ValueError as e:
        raise ConfigError(f"job {job.id!r} (export): param 'out': {e}") from None
    if params.since_last is not None:
        try:
            refuse_load_name(params.since_last, "param 'since_last'")
        except ValueError as e:
            raise ConfigError(f"job {job.id!r} (export): {e}") from None
        if not params.since_last.strip():
            raise ConfigError(f"job {job.id!r} (export): param 'since_last' is blank; a name is {SLUG_RULE}")


def job_warnings(params: dict[str, JobParams]) -> list[str]:
    """What ``formsync run`` warns of in the checked jobs (``check_jobs``' answer), one
    line each: an incremental export whose ``out`` has neither ``{run}`` nor ``{time}``
    (its second run of a day would find the day's file and refuse)."""
    return [f"job {job_id!r} (export): param 'out' = {str(p.out)!r} has neither {{run}} nor {{time}}: a second "
            f"run the same day finds its file and refuses; write e.g. '{p.out.parent / '{form}-{date}-{run}'}"
            f"{p.out.suffix}'"
            for job_id, p in params.items()
            if isinstance(p, ExportParams) and p.since_last is not None and p.out is not None
            and "{run}" not in p.out.name and "{time}" not in p.out.name]


def trigger_for(job: JobSettings) -> BaseTrigger | None:
    """The job's trigger: a crontab expression (five fields: minute hour day month
    day-of-week, in UTC) or a fixed interval; None for a job that only runs ``after``
    another. A bad cron string is a ``ConfigError``."""
    if job.cron is None and job.interval_seconds is None:
        return None
    if job.cron is not None:
        try:
            return CronTrigger.from_crontab(job.cron, timezone="UTC")
        except ValueError as e:
            raise ConfigError(f"job {job.id!r}: bad cron {job.cron!r}: {e}; expected five fields "
                              f"'minute hour day month day-of-week', e.g. '0 2 * * *'") from None
    assert job.interval_seconds is not None  # JobSettings demands one of the two
    return IntervalTrigger(seconds=job.interval_seconds, timezone="UTC")


def schedule_text(job: JobSettings) -> str:
    """How the job's schedule reads in ``formsync status``."""
    parts = [f"cron {job.cron}" if job.cron is not None else
             f"every {job.interval_seconds} s" if job.interval_seconds is not None else ""]
    if job.run_at_start:
        parts.append("first at start")
    if job.after is not None:
        parts.append(f"after {job.after}")
    return ", ".join(p for p in parts if p)


def shortest_gap(trigger: BaseTrigger | None, runs: int = 48) -> float | None:
    """The shortest time in seconds between two runs of ``trigger`` (its first ``runs``
    fire times from a fixed date, enough for any cron's pattern within a day), or None
    for a job that only runs after another."""
    if trigger is None:
        return None
    if isinstance(trigger, IntervalTrigger):
        return float(trigger.interval_length)
    start = datetime(2026, 1, 5, tzinfo=UTC)  # a Monday
    times: list[datetime] = []
    previous = None
    for _ in range(runs):
        nxt = trigger.get_next_fire_time(previous, start if previous is None else previous + timedelta(seconds=1))
        if nxt is None:
            break
        times.append(nxt)
        previous = nxt
    gaps = [(b - a).total_seconds() for a, b in zip(times, times[1:], strict=False)]
    return min(gaps) if gaps else None


def check_spacing(job: JobSettings, trigger: BaseTrigger | None) -> None:
    """A remind job runs no more often than the service lets a request be reminded
    (once per 10 minutes): more often, a run finds every request reminded too recently.
    Else a ``ConfigError`` naming the job and the fix."""
    from pipelines.campaign.actions import SPACING_MS

    gap = shortest_gap(trigger) if job.kind == "remind" else None
    if gap is not None and gap * 1000 < SPACING_MS:
        least = SPACING_MS // 1000
        raise ConfigError(f"job {job.id!r} (remind): runs every {gap:g} s, more often than the service lets a "
                          f"request be reminded (once per {least // 60} minutes); set interval_seconds = {least} "
                          f"or more, or a cron at most every {least // 60} minutes")


def check_after(jobs: list[JobSettings]) -> None:
    """Every ``after`` names another configured job, and no chain of them comes back to
    where it started; else a ``ConfigError`` naming the job."""
    ids = {j.id: j for j in jobs}
    for job in jobs:
        if job.after is not None and job.after not in ids:
            known = ", ".join(sorted(i for i in ids if i != job.id)) or "none"
            raise ConfigError(f"job {job.id!r}: after = {job.after!r} names no configured job; "
                              f"job ids: {known}")
    for job in jobs:
        if job.after is None:
            continue
        chain, at = [job.id], ids[job.after]
        while at.id not in chain:
            chain.append(at.id)
            if at.after is None:
                break
            at = ids[at.after]
        else:
            cycle = " -> ".join([*chain[chain.index(at.id):], at.id])
            raise ConfigError(f"job {job.id!r}: after makes a cycle ({cycle}); "
                              f"one of these jobs needs cron or interval_seconds instead")


def followers(jobs: list[JobSettings], job_id: str) -> list[str]:
    """The jobs that run each time a run of ``job_id`` finishes (``after = job_id``)."""
    return [j.id for j in jobs if j.after == job_id]


def fingerprint(job: JobSettings) -> str:
    """A hash of everything that defines the job: a stored job with the same fingerprint
    keeps its persisted next run time across restarts; a changed one is rescheduled."""
    # run_at_start is left out: it decides only the first run after a start, which
    # reconcile sets each time (and a job stored before the setting existed stays as it was).
    text = json.dumps(job.model_dump(mode="json", exclude={"run_at_start"}), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def check_jobs(settings: Settings, *, to_run: bool = True, signed_in: bool = False) -> dict[str, JobParams]:
    """Every job's params and trigger checked: job id -> params. The first problem is a
    ``ConfigError``. With ``to_run`` (the scheduler), a job that talks to the service also
    needs ``service.token`` or a sign-in (``signed_in``: the store holds one, from
    ``formsync login``); ``formsync status`` reads only the store and needs neither."""
    out: dict[str, JobParams] = {}
    check_after(settings.jobs)
    for job in settings.jobs:
        if (why := name_problem(job.id)) is not None:
            raise ConfigError(f"job id: {why}; a job id is {SLUG_RULE}")
        out[job.id] = parse_params(job)
        check_spacing(job, trigger_for(job))
        if to_run and job.kind in NEEDS_TOKEN and settings.service.token is None and not signed_in:
            raise ConfigError(f"job {job.id!r} ({job.kind}) talks to the service, but service.token is not set: "
                              f"put it in the [service] section or in FORMSYNC_SERVICE__TOKEN, or run `formsync login`")
    return out


def describe_settings_error(error: ValidationError, config: Path | None) -> str:
    """A settings ``ValidationError`` as lines naming each bad key; a problem inside
    ``[[jobs]]`` names the job by its id (read from the file) instead of its position."""
    ids: list[Any] = []
    if config is not None:
        try:
            ids = [j.get("id") if isinstance(j, dict) else None
                   for j in tomllib.loads(config.read_text()).get("jobs", [])]
        except (OSError, tomllib.TOMLDecodeError, AttributeError):
            ids = []
    lines = []
    for err in error.errors():
        loc = list(err["loc"])
        where = ".".join(str(p) for p in loc)
        if len(loc) >= 2 and loc[0] == "jobs" and isinstance(loc[1], int):
            name = ids[loc[1]] if loc[1] < len(ids) and ids[loc[1]] else f"#{loc[1] + 1}"
            key = ".".join(str(p) for p in loc[2:]) or "(the job)"
            where = f"job {name!r}: {key}"
        msg = err["msg"].removeprefix("Value error, ")
        # Only a job's own settings are echoed: anywhere else the value may be a token or a
        # secret (a misspelled key, a secret given as text instead of a list).
        shown = (loc[0] == "jobs" and err["type"] not in ("missing", "extra_forbidden")
                 and not isinstance(err.get("input"), dict | list))
        lines.append(f"{where}: {msg}" + (f" (got {err['input']!r})" if shown else ""))
    return "; ".join(lines)


def summarise(kind: str, report: BaseModel) -> str:
    """One short line saying what a run did, from its report."""
    r: Any = report
    if kind == "outreach":  # the words of ``formsync outreach``'s last line and ``formsync status``
        # A run whose only problems are rows in its report is done (recorded "ok"); rows the
        # service refused are sent again by the next run, and listed in status's errors.
        said = r.outcome(r.report_path if r.problems else None)
        return f"stopped: {said}" if r.stopped else (said if r.failed else f"done: {said}")
    if kind == "poll":
        return (f"pending {r.pending_before}: completed {r.completed}, expired {r.expired}, "
                f"canceled {r.canceled}, still pending {r.still_pending}, {r.calls} calls"
                + (f"; {len(r.suppressed)} canceled as suppressed" if getattr(r, "suppressed", None) else ""))
    if kind == "sync":
        if hasattr(r, "outcome"):  # a reconcile
            return str(r.outcome())
        forms = getattr(r, "forms", None)
        if forms is None:
            return (f"form {r.form_id}: {'read whole (edits included), ' if r.full else ''}fetched {r.fetched}, "
                    f"written {r.written}, {r.calls} calls")
        whole = sum(1 for f in forms if f.full)
        return (f"{len(forms)} forms{f' ({whole} read whole, edits included)' if whole else ''}: "
                f"fetched {sum(f.fetched for f in forms)}, written {sum(f.written for f in forms)}, {r.calls} calls")
    if kind == "export":  # "nothing new" for an incremental run with nothing to write
        return "; ".join(f.outcome() for f in r.files) or "nothing new"
    if kind == "load":
        rows = ", ".join(f"{k} {v}" for k, v in r.rows.items())
        deleted = "".join(f"; deleted {k} {v}" for k, v in r.deleted.items())
        return f"loaded into {r.destination}/{r.dataset} ({rows or 'nothing new'}{deleted})"
    if kind in ("remind", "close"):  # the words of the campaign command's last line
        from pipelines.campaign.words import action_outcome

        return f"{r.job}: {action_outcome(r)}; {r.calls} calls"
    if kind in ("files", "purge"):
        return str(r.outcome())
    if kind == "views":
        return f"{len(r.views)} views" + "".join(f"; {w}" for w in r.warnings[:3])
    return str(report)[:200]

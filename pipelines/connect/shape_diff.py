"""`formsync sandbox diff`: the same read-only calls sent to the upstream and to a sandbox
seeded from it, and where their answers differ in shape. ``differences`` is the pure rule
(keys, JSON types, nulls, error codes and reasons; never ids, times, URLs or list lengths);
``compare`` sends the calls."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from connector import errors
from connector.client.rpc import FormClient

from .seed_from import all_items

# Keys whose values are ids, times or URLs: their presence counts, their value's type not.
_IGNORED = re.compile(r"^(id|.*Id|.*At|.*Url|url|.*Cursor|cursor|token)$")
# An id no workspace holds: the error each side answers is compared too.
MISSING_FORM = "form_0000000000000000000000"


def json_type(value: Any) -> str:
    """The JSON type of a parsed value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def differences(upstream: Any, sandbox: Any, path: str = "") -> list[str]:
    """Where ``sandbox`` differs in shape from ``upstream``: a key on one side only, another
    JSON type (null included), another error code or reason; element by element in arrays as
    far as both go. Each difference is one line naming its path."""
    here = path or "(answer)"
    a, b = json_type(upstream), json_type(sandbox)
    if a != b:
        return [f"{here}: {a} upstream, {b} in the sandbox"]
    if a == "array":
        return [d for i, (x, y) in enumerate(zip(upstream, sandbox, strict=False))
                for d in differences(x, y, f"{path}[{i}]")]
    if a != "object":
        return []
    out: list[str] = []
    for key in sorted(upstream.keys() | sandbox.keys()):
        at = f"{path}.{key}" if path else key
        if key not in sandbox:
            out.append(f"{at}: only upstream")
        elif key not in upstream:
            out.append(f"{at}: only in the sandbox")
        elif path.endswith("error") and key in ("code", "reason") and upstream[key] != sandbox[key]:
            out.append(f"{at}: {upstream[key]!r} upstream, {sandbox[key]!r} in the sandbox")
        elif not _IGNORED.match(key):
            out.extend(differences(upstream[key], sandbox[key], at))
    return out


@dataclass
class CallDiff:
    """One call sent to both sides and where the answers differ."""

    call: str
    differences: list[str]


async def answer(fc: FormClient, method: str, params: dict[str, Any]) -> Any:
    """The call's data, or ``{"error": {"code", "reason"}}`` when the service refuses it."""
    try:
        return await fc.call(method, params)
    except errors.ApiError as e:
        return {"error": {"code": e.code, "reason": e.reason}}


def planned_calls(form_count: int) -> int:
    """How many calls ``compare`` sends to each side for ``form_count`` forms, at most (the
    upstream's forms listed on one page; the sandbox is not sent the first listing)."""
    return 5 + 4 * form_count


async def compare(upstream: FormClient, sandbox: FormClient,
                  on_plan: Callable[[int], None] | None = None) -> list[CallDiff]:
    """The read-only calls, each sent to both sides (each side's workspace id; the same form
    ids, as a seeded sandbox keeps them), with their differences in shape."""
    up_ws = (await upstream.call("workspaces.list", {}))["items"][0]["id"]
    sb_ws = (await sandbox.call("workspaces.list", {}))["items"][0]["id"]
    forms = await all_items(upstream, "forms.list", {"workspaceId": up_ws, "limit": 100})
    if on_plan is not None:
        on_plan(planned_calls(len(forms)))
    out: list[CallDiff] = []

    async def both(label: str, method: str, up: dict[str, Any], sb: dict[str, Any]) -> None:
        out.append(CallDiff(label, differences(await answer(upstream, method, up), await answer(sandbox, method, sb))))

    sides: list[Callable[[], Awaitable[None]]] = [
        lambda: both("forms.list", "forms.list", {"workspaceId": up_ws}, {"workspaceId": sb_ws}),
        lambda: both("folders.list", "folders.list", {"workspaceId": up_ws}, {"workspaceId": sb_ws}),
        lambda: both("forms.get (a form no workspace holds)", "forms.get", {"formId": MISSING_FORM},
                     {"formId": MISSING_FORM}),
    ]
    for step in sides:
        await step()
    for item in forms:
        params = {"formId": item["id"]}
        for method in ("forms.get", "fields.list", "formSettings.get", "translations.listEntries"):
            await both(f"{method} {item['name']!r}", method, params, params)
    return out

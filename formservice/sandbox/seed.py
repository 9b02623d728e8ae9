"""Seeding a sandbox from YAML, and the credentials it hands out (token values exist only
there and in the credentials file: the store keeps hashes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from sqlmodel import select

from ..domain import auth
from ..domain import forms as forms_domain
from ..domain import oauth as oauth_domain
from ..domain import submissions as subs_domain
from ..domain.settings import WRITABLE
from ..errors import ApiError
from ..ids import new_id, new_signing_secret
from ..service import Service
from ..tables import ApiToken, Folder, Integration, Member, User, Workspace

DEFAULT_SEED = Path(__file__).parent.parent / "data" / "sandbox-seed.yaml"
CREDENTIALS = "sandbox-credentials.json"
SEED_CREDENTIALS = "seed-credentials.json"  # the seed's credentials, kept for reset


class SeedError(ValueError):
    """A seed that cannot be used: the text names the file (and the line and column when
    the YAML itself is broken), what is wrong and how to fix it."""


def load_seed(path: Path | str | None) -> dict[str, Any]:
    """The seed YAML at ``path`` (the built-in seed when None); a ``SeedError`` when it
    cannot be read, is not YAML (``file:line:col: problem``) or holds no ``workspaces``
    list of mappings."""
    where = Path(path or DEFAULT_SEED)
    try:
        seed = _parse(where.read_text(encoding="utf-8"))
    except yaml.MarkedYAMLError as e:
        raise SeedError(f"{_position(where, e)}: {e.problem or e.context or 'not YAML'}; "
                        "fix the YAML there (config/sandbox-seed.yaml shows a seed)") from None
    except yaml.YAMLError as e:
        raise SeedError(f"{where}: not YAML ({e}); fix the file (config/sandbox-seed.yaml shows a seed)") from None
    except UnicodeDecodeError:
        raise SeedError(f"{where}: not UTF-8 text; save the seed as UTF-8 YAML") from None
    except OSError as e:
        raise SeedError(f"{where}: cannot be read ({e.strerror}); give a readable YAML file") from None
    workspaces = seed.get("workspaces") if isinstance(seed, dict) else None
    if not isinstance(workspaces, list) or not all(isinstance(w, dict) and w.get("name") for w in workspaces):
        raise SeedError(f"{where}: a seed holds a 'workspaces' list, each with a 'name' "
                        "(config/sandbox-seed.yaml shows a seed)")
    return seed


def _parse(text: str) -> Any:
    """The YAML ``text`` as ``yaml.safe_load`` reads it, read by libyaml when PyYAML has it
    (the built-in seed in a few milliseconds instead of some thirty, at every sandbox
    start); a text it refuses is read again by the pure-Python parser, whose errors the
    messages above are written for."""
    loader = getattr(yaml, "CSafeLoader", None)
    if loader is not None:
        try:
            return yaml.load(text, Loader=loader)  # the safe loader, in C
        except yaml.YAMLError:
            pass
    return yaml.safe_load(text)


def _position(path: Path, e: yaml.MarkedYAMLError) -> str:
    """``file:line:col`` (from 1) of the mark of a YAML error."""
    mark = e.problem_mark or e.context_mark
    return f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)


def apply_seed(service: Service, seed: dict[str, Any]) -> dict[str, Any]:
    """Create the seed's people, workspaces, tokens and forms, and the system OAuth clients
    (``fboc_zapier``, ``fboc_make``). Returns the credentials."""
    now = service.now()
    out: list[dict[str, Any]] = []
    with service.session() as s:
        for ws_seed in seed["workspaces"]:
            owner = ws_seed.get("owner") or {}
            user = User(id=new_id("usr"), email=owner.get("email", "owner@example.test"),
                        name=owner.get("name", "Owner"))
            ws = Workspace(
                id=new_id("ws"), name=ws_seed["name"], plan=ws_seed.get("plan", "free"), owner_id=user.id,
                signing_secret=new_signing_secret(), monthly_allowance=int(ws_seed.get("monthlyAllowance", 100)),
                partial_tracking=bool(ws_seed.get("partialTracking", True)),
                payment_connected=bool(ws_seed.get("paymentConnected", False)),
                email_domains=[{"id": new_id("edom"), **d} for d in ws_seed.get("emailDomains", [])],
                custom_domains=[{"id": new_id("cdom"), **d} for d in ws_seed.get("customDomains", [])],
                created_at=now,
            )
            s.add_all([user, ws, Member(workspace_id=ws.id, user_id=user.id)])
            s.flush()
            token, _ = auth.create_api_token(s, user.id, ws.id, "sandbox", now)
            folder = Folder(id=new_id("fld"), workspace_id=ws.id, name="Archive", created_at=now)
            s.add(folder)
            folders = {"Archive": folder.id}
            for name in ws_seed.get("folders", []):
                if name not in folders:
                    folders[name] = new_id("fld")
                    s.add(Folder(id=folders[name], workspace_id=ws.id, name=name, created_at=now))
            form_ids = _seed_forms(s, ws.id, ws_seed.get("forms", []), now, folders)
            for integ in ws_seed.get("integrations", []):
                s.add(Integration(id=new_id("int"), form_id=form_ids[integ["form"]],
                                  include_pdf=bool(integ.get("includePdf")), created_at=now))
            out.append({"id": ws.id, "name": ws.name, "plan": ws.plan, "token": token,
                        "signingSecret": ws.signing_secret, "userId": user.id, "folderId": folder.id,
                        "forms": form_ids})
        clients = oauth_domain.seed_system_clients(s, now)
        service.set_meta(s, "seeded", "1")
        s.commit()
    return {"workspaces": out, "oauthClients": clients}


def _seed_forms(s: Any, workspace_id: str, forms: list[dict[str, Any]], now: int,
                folders: dict[str, str]) -> dict[str, str]:
    """Create the seeded forms (published and with submissions as the seed says); their ids by name.
    A form's optional ``id``, ``folder`` (a name in the workspace's ``folders``), ``cover``,
    ``logo`` and ``settings`` (the writable names of formSettings.update) are kept as given."""
    form_ids: dict[str, str] = {}
    for i, f_seed in enumerate(forms):
        # one ms apart, so "newest first" lists the seed's forms in reverse seed order
        created = now - len(forms) + i
        folder = f_seed.get("folder")
        form = forms_domain.new_form(s, workspace_id, f_seed["name"], folders[folder] if folder else None, created,
                                     blocks=f_seed.get("blocks") or [], emoji=f_seed.get("emoji"),
                                     form_id=f_seed.get("id"))
        form.cover, form.logo = f_seed.get("cover"), f_seed.get("logo")
        if f_seed.get("settings"):
            form.settings = {k: v for k, v in f_seed["settings"].items() if k in WRITABLE}
        if f_seed.get("published"):
            forms_domain.publish_form(s, form, created)
        for j, sub in enumerate(f_seed.get("submissions", [])):
            subs_domain.record_submission(
                s, form, dict(sub.get("answers") or {}), created + j, completed=sub.get("completed", True),
                respondent_email=sub.get("respondentEmail"),
            )
        form_ids[f_seed["name"]] = form.id
    return form_ids


def prepare(service: Service, data_dir: Path | None, seed: dict[str, Any],
            seed_path: Path | str | None = None) -> dict[str, Any]:
    """Seed a new data dir with ``seed`` (read by ``load_seed`` from ``seed_path``), or
    reuse what it holds, and return the credentials. A seed whose forms or workspaces the
    service refuses is a ``SeedError`` naming the file."""
    stored = data_dir / CREDENTIALS if data_dir else None
    if stored is not None and stored.exists() and service.meta("seeded"):
        creds = json.loads(stored.read_text())
    else:
        try:
            creds = apply_seed(service, seed)
        except (KeyError, TypeError, ValueError, AttributeError, ApiError) as e:
            said = f"a missing key {e}" if isinstance(e, KeyError) else str(e)
            raise SeedError(f"{seed_path or DEFAULT_SEED}: the sandbox cannot apply this seed ({said}); "
                            "config/sandbox-seed.yaml shows a seed") from None
        service.save_seed_state()  # what the reset helper goes back to
        if stored is not None:
            stored.write_text(json.dumps(creds, indent=2))
            # what reset hands out again, whatever a snapshot restored since
            (stored.parent / SEED_CREDENTIALS).write_text(json.dumps(creds, indent=2))
    return {"baseUrl": service.base_url, **creds}


def seed_credentials(data_dir: Path | None) -> dict[str, Any]:
    """The credentials the seed handed out in ``data_dir`` (empty when not kept: no data
    dir, or one seeded by an older version)."""
    kept = data_dir / SEED_CREDENTIALS if data_dir is not None else None
    return json.loads(kept.read_text()) if kept is not None and kept.is_file() else {}


def renew_token(service: Service, workspace_id: str, user_id: str, name: str) -> str:
    """A new API token for the person in the workspace, valid for the usual lifetime from
    the service clock's now; tokens of the same ``name`` held by that person there are
    deleted first. For code that runs the sandbox in-process and moves its clock past a
    token's lifetime (the helpers need a live token to mint one)."""
    with service.session() as s:
        for old in s.exec(select(ApiToken).where(ApiToken.user_id == user_id, ApiToken.workspace_id == workspace_id,
                                                 ApiToken.name == name)).all():
            s.delete(old)
        s.flush()
        value, _ = auth.create_api_token(s, user_id, workspace_id, name, service.now())
        s.commit()
    return value

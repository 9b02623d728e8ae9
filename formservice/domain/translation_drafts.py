"""Translation languages and drafts (the agent's ``translationLanguage_*`` and
``translationDraft_*`` tools), on the ``TranslationEntry`` rows that
``translations.listEntries`` and translated submission lists read.

The translatable texts of a form are those ``translations.listEntries`` lists: the
customised respondent email subjects and bodies, and the published questions' titles
and option labels. A published translation is ``translations[<language>]`` (a string) on
the text's entry row. A draft waits beside it under the reserved member ``_draft``
(``{language: {"text": str | None}}``; None removes the translation on publish), so
readers of published translations never see drafts; a language tag cannot be
``_draft``. Publishing a language moves its drafts into place.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field
from sqlmodel import select

from ..errors import ApiError, validation
from ..tables import Form, Snapshot, TranslationEntry
from .agentops import agent_method
from .base import Ctx, Params, Result
from .settings import BODY_MAX, TRANSLATABLE, check_language, field_sources, settings_of

DRAFT = "_draft"
MAX_TEXTS_PER_CALL = 500


def sources(ctx: Ctx, form: Form) -> list[tuple[str, str]]:
    """(key, source text) of every translatable text of the form, in listEntries order."""
    rows = _rows(ctx, form)
    out = [(f"settings.{n}", rows[f"settings.{n}"].source) for n in TRANSLATABLE if f"settings.{n}" in rows]
    snapshot = ctx.session.get(Snapshot, form.snapshot_id) if form.snapshot_id else None
    return out + field_sources(snapshot)


def _rows(ctx: Ctx, form: Form) -> dict[str, TranslationEntry]:
    return {e.key: e for e in ctx.session.exec(select(TranslationEntry).where(TranslationEntry.form_id == form.id))}


def _published(entry: TranslationEntry | None, language: str) -> str | None:
    text = (entry.translations or {}).get(language) if entry else None
    return text if isinstance(text, str) else None


def _drafts(entry: TranslationEntry | None) -> dict[str, Any]:
    return dict(((entry.translations or {}).get(DRAFT) or {}) if entry else {})


def languages_of(rows: dict[str, TranslationEntry]) -> list[str]:
    """Every language with a published translation or a draft on any entry."""
    found: set[str] = set()
    for e in rows.values():
        tr = e.translations or {}
        found.update(k for k, v in tr.items() if k != DRAFT and isinstance(v, str))
        found.update(_drafts(e))
    return sorted(found)


def published_languages(session: Any, form_id: str) -> list[str]:
    """Languages with at least one published translation on the form (drafts do not count)."""
    found: set[str] = set()
    for e in session.exec(select(TranslationEntry).where(TranslationEntry.form_id == form_id)):
        found.update(k for k, v in (e.translations or {}).items() if k != DRAFT and isinstance(v, str))
    return sorted(found)


def published_texts(session: Any, form_id: str, language: str) -> dict[str, str]:
    """Text key -> published translation into ``language``, for the form's translated texts."""
    rows = session.exec(select(TranslationEntry).where(TranslationEntry.form_id == form_id))
    return {e.key: text for e in rows if (text := _published(e, language)) is not None}


def translate_blocks(blocks: list[dict[str, Any]], texts: dict[str, str]) -> list[dict[str, Any]]:
    """The blocks with question titles and option labels replaced by their translation
    (keys ``field.<key>.title`` and ``field.<key>.option.<option>``); untranslated texts
    stay in the source language. Pure; the input is not changed."""
    if not texts:
        return blocks
    out = []
    for b in blocks:
        key = b.get("key")
        if not key:
            out.append(b)
            continue
        nb = dict(b)
        if f"field.{key}.title" in texts:
            nb["title"] = texts[f"field.{key}.title"]
        if isinstance(b.get("options"), list):
            nb["options"] = [{**o, "label": texts.get(f"field.{key}.option.{o.get('key')}", o.get("label"))}
                             if isinstance(o, dict) else o for o in b["options"]]
        out.append(nb)
    return out


def _language(ctx: Ctx, form: Form, tag: str, *, known: bool) -> str:
    """``tag`` in canonical form; with ``known``, it must be one of the form's languages."""
    language = check_language("language", tag)
    if language == settings_of(form, ctx.workspace.plan).language:
        raise validation(f"language {language} is the form's own language; its texts need no translation.",
                         field="language", reason="SAME_AS_SOURCE")
    if known:
        have = languages_of(_rows(ctx, form))
        if language not in have:
            raise ApiError("NOT_FOUND", f"This form has no {language} translation or draft.", field="language",
                           reason="UNKNOWN_LANGUAGE", validValues=have)
    return language


# -- params and results --------------------------------------------------------------------


class FormRef(Params):
    formId: str


class LanguageParams(Params):
    formId: str
    language: Annotated[str, Field(min_length=2, max_length=35)]


class UpdateParams(LanguageParams):
    translations: Annotated[dict[str, Annotated[str, Field(min_length=1, max_length=BODY_MAX)] | None],
                            Field(min_length=1, max_length=MAX_TEXTS_PER_CALL)]


class LanguageItem(Result):
    language: str
    translated: int  # texts with a published translation
    drafted: int  # texts with a draft waiting to be published
    total: int  # translatable texts of the form
    complete: bool  # every text has a published translation


class LanguageList(Result):
    formId: str
    sourceLanguage: str
    items: list[LanguageItem]


class DraftItem(Result):
    key: str
    source: str
    published: str | None
    draft: str | None
    removeOnPublish: bool = False


class DraftView(Result):
    formId: str
    language: str
    items: list[DraftItem]
    hasDraft: bool


class LanguageDeleted(Result):
    formId: str
    language: str
    deleted: bool
    entries: int  # texts whose translation or draft was removed


class DraftPublished(Result):
    formId: str
    language: str
    published: int  # translations written
    removed: int  # translations removed (drafted as null)
    noChange: bool = False


# -- tools ---------------------------------------------------------------------------------


@agent_method("translationLanguage_list")
def languages_list(ctx: Ctx, p: FormRef) -> LanguageList:
    """The languages a form is translated (or being translated) into, with progress."""
    form = ctx.form(p.formId)
    rows = _rows(ctx, form)
    keys = [k for k, _ in sources(ctx, form)]
    items = []
    for language in languages_of(rows):
        translated = sum(1 for k in keys if _published(rows.get(k), language) is not None)
        drafted = sum(1 for k in keys if language in _drafts(rows.get(k)))
        items.append(LanguageItem(language=language, translated=translated, drafted=drafted, total=len(keys),
                                  complete=bool(keys) and translated == len(keys)))
    return LanguageList(formId=form.id, sourceLanguage=settings_of(form, ctx.workspace.plan).language, items=items)


@agent_method("translationLanguage_delete")
def language_delete(ctx: Ctx, p: LanguageParams) -> LanguageDeleted:
    """Remove a language from a form: its published translations and its drafts."""
    form = ctx.form(p.formId)
    language = _language(ctx, form, p.language, known=True)
    touched = 0
    for entry in _rows(ctx, form).values():
        tr = dict(entry.translations or {})
        drafts = _drafts(entry)
        if language not in tr and language not in drafts:
            continue
        tr.pop(language, None)
        drafts.pop(language, None)
        if drafts:
            tr[DRAFT] = drafts
        else:
            tr.pop(DRAFT, None)
        entry.translations = tr
        entry.updated_at = ctx.now
        touched += 1
    return LanguageDeleted(formId=form.id, language=language, deleted=True, entries=touched)


def _draft_view(ctx: Ctx, form: Form, language: str) -> DraftView:
    rows = _rows(ctx, form)
    items = []
    for key, source in sources(ctx, form):
        drafts = _drafts(rows.get(key))
        item = DraftItem(key=key, source=source, published=_published(rows.get(key), language),
                         draft=(drafts.get(language) or {}).get("text"))
        if language in drafts and drafts[language].get("text") is None:
            item.removeOnPublish = True
        items.append(item)
    return DraftView(formId=form.id, language=language, items=items,
                     hasDraft=any(language in _drafts(e) for e in rows.values()))


@agent_method("translationDraft_get")
def draft_get(ctx: Ctx, p: LanguageParams) -> DraftView:
    """Every translatable text of a form with its published translation into
    ``language`` and the draft waiting to replace it."""
    form = ctx.form(p.formId)
    return _draft_view(ctx, form, _language(ctx, form, p.language, known=False))


@agent_method("translationDraft_update")
def draft_update(ctx: Ctx, p: UpdateParams) -> DraftView:
    """Write draft translations (text key -> text; null drafts the removal of the
    published one). Nothing reaches respondents until translationDraft_publish."""
    form = ctx.form(p.formId)
    language = _language(ctx, form, p.language, known=False)
    known = dict(sources(ctx, form))
    for key in p.translations:
        if key not in known:
            raise validation(f"translations.{key} is not a translatable text of this form; translationDraft_get "
                             "lists the keys (publish the form first for question texts).",
                             field=f"translations.{key}", reason="UNKNOWN_FIELD_KEY", validKeys=sorted(known))
    rows = _rows(ctx, form)
    for key, text in p.translations.items():
        entry = rows.get(key)
        if entry is None:  # question texts get a row the first time they are translated
            entry = TranslationEntry(form_id=form.id, key=key, source=known[key], translations={},
                                     updated_at=ctx.now)
            ctx.session.add(entry)
        tr = dict(entry.translations or {})
        drafts = _drafts(entry)
        drafts[language] = {"text": text}
        tr[DRAFT] = drafts
        entry.translations = tr
        entry.updated_at = ctx.now
    ctx.session.flush()
    return _draft_view(ctx, form, language)


@agent_method("translationDraft_publish")
def draft_publish(ctx: Ctx, p: LanguageParams) -> DraftPublished:
    """Publish a language's drafts: respondents and translated submission lists see them."""
    form = ctx.form(p.formId)
    language = _language(ctx, form, p.language, known=True)
    written = removed = 0
    for entry in _rows(ctx, form).values():
        drafts = _drafts(entry)
        if language not in drafts:
            continue
        tr = dict(entry.translations or {})
        text = drafts.pop(language).get("text")
        if text is None:
            removed += language in tr
            tr.pop(language, None)
        else:
            tr[language] = text
            written += 1
        if drafts:
            tr[DRAFT] = drafts
        else:
            tr.pop(DRAFT, None)
        entry.translations = tr
        entry.updated_at = ctx.now
    out = DraftPublished(formId=form.id, language=language, published=written, removed=removed)
    if not written and not removed:
        out.noChange = True
    return out

"""The connector's SQL store: what the receiver, the poller and the sync job bring from
the service, persisted in the user's own database (SQLite by default, PostgreSQL or MySQL/MariaDB by URL).

The public surface is ``Store`` and the types its documented methods take and give
(``Store.schema()``'s ``FormSchema`` of ``Column`` and ``StoredField``, ``Store.views()``'s
``FormView`` of ``ViewColumn``, an export's ``ExportFilter``). The private modules behind it
hold one concern each: ``_tables`` (the schema), ``_mapping`` (events and reads to rows, pure),
``_merge`` (newest wins), ``_responses`` (one response, one submission row, whichever route
brought it), ``_writer`` (the protocol of a database's writer and what writers share),
``_sqlite``, ``_postgresql`` and ``_mysql`` (one writer per database), ``_views`` and
``_keeper`` (each form's field list and typed view), ``_database`` (the engine and its
sessions, below everything else), ``_facade`` (the ``Store``), and the repositories the
``Store`` offers, each a module: ``_runs`` (``store.runs``), ``_lease`` (``store.leader_lock()``,
whose protocol ``_leader`` holds), ``_requests``, ``_events``, ``_submissions``,
``_deadletters`` (``store.dead_letters``), ``_progress`` (``store.outreach_progress``),
``_campaign``, ``_jobstore`` (``store.scheduled_jobs``), ``_exports`` and ``_cursors``
(``store.export_cursors``)."""

from ._exports import ExportFilter
from ._facade import Store
from ._schema import Column, FormSchema, StoredField
from ._views import FormView, ViewColumn

__all__ = ["Column", "ExportFilter", "FormSchema", "FormView", "Store", "StoredField", "ViewColumn"]

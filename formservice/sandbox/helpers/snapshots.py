"""Helpers that save the sandbox's whole state under a name and go back to it
(formservice/sandbox/snapshots.py keeps them)."""

from __future__ import annotations

from ...clock import from_ms
from ...domain.base import Ctx
from ...service import Service
from ..models import NoParams, SnapshotList, SnapshotParams, SnapshotView
from ..snapshots import SnapshotInfo, store_of
from .registry import helper


def _view(info: SnapshotInfo) -> SnapshotView:
    return SnapshotView(name=info.name, saved_at=from_ms(info.saved_at), size_bytes=info.size_bytes)


@helper("snapshot.save")
async def snapshot_save(service: Service, p: SnapshotParams) -> SnapshotView:
    """Save the sandbox's state under ``name`` (replacing a snapshot of that name): every
    table, the clock, the limits and rate windows, pending deliveries and the mail outbox.
    Delivery attempts under way finish first, so the copy holds their outcome."""
    await service.worker.settle()
    return _view(store_of(service).save(service, p.name))


@helper("snapshot.restore")
async def snapshot_restore(service: Service, p: SnapshotParams) -> SnapshotView:
    """Go back to the state saved as ``name``: its tokens and signing secrets work again,
    tokens made since stop working, the credentials file is rewritten; the fault plan and
    dialect in force stay. NOT_FOUND for an unknown name; CONFLICT (``SNAPSHOT_VERSION``)
    for a snapshot another version of the sandbox saved."""
    await service.worker.settle()
    return _view(store_of(service).restore(service, p.name))


@helper("snapshot.list")
def snapshot_list(ctx: Ctx, p: NoParams) -> SnapshotList:
    """The snapshots kept (across restarts when the sandbox has a snapshot dir), by name."""
    return SnapshotList(items=[_view(i) for i in store_of(ctx.service).kept()])

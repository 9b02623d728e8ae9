"""What a scheduler's leader lock promises (``LeaderLock``), its name and how a holder
is named: below every writer and the lease, so each database's lock implements it
without importing the store's engine."""

from __future__ import annotations

import os
import socket
import uuid
from typing import Protocol

LOCK_NAME = "formsync-scheduler"


def holder_id() -> str:
    """This process, as a lease holder: host, pid and a random part (pids are reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class LeaderLock(Protocol):
    def try_acquire(self) -> bool:
        """Take the lock if free (or already ours); True when we hold it now."""
        ...

    def still_held(self) -> bool:
        """Confirm (and, for a lease, renew) that we hold the lock; False when lost."""
        ...

    def release(self) -> None:
        """Give the lock up (idempotent)."""
        ...

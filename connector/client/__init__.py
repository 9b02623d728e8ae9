"""The client side: calling the service.

``rpc.py`` is the typed JSON-RPC client (``FormClient``: pagination, retries, pacing),
reading the service's time from its answers (``clock.py``) and pacing its calls
(``pacing.py``); ``agent.py`` calls the agent (MCP) endpoint; ``oauth.py`` and
``grant.py`` sign in and choose the token a call uses; ``webhooks.py`` builds what
webhooks.create takes; ``field_lists.py`` reads a form's fields.list when an answer names
a key the store lacks. ``connector.client`` offers what its single module offered before
(``from connector.client import FormClient``), each name imported on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from connector._lazy import lazy_exports

if TYPE_CHECKING:
    from .rpc import CREATE_METHODS as CREATE_METHODS
    from .rpc import UNSAFE_METHODS as UNSAFE_METHODS
    from .rpc import UNSET as UNSET
    from .rpc import FormClient as FormClient
    from .rpc import TokenSource as TokenSource
    from .rpc import Unset as Unset
    from .rpc import api as api
    from .rpc import backoff_delay as backoff_delay
    from .rpc import jsonable as jsonable
    from .rpc import params_of as params_of
    from .rpc import safe_to_repeat as safe_to_repeat

__all__ = [
    "CREATE_METHODS", "FormClient", "TokenSource", "UNSAFE_METHODS", "UNSET", "Unset", "api", "backoff_delay",
    "jsonable", "params_of", "safe_to_repeat",
]

__getattr__, __dir__ = lazy_exports(__name__, dict.fromkeys(__all__, "rpc"), globals())

"""The formsync connector: a typed client, signature verification, a receiver and a SQL store.

What a library user needs is importable from here (``from connector import FormClient,
Store, verify``); the modules behind these names hold the rest. Each name is imported on
first use, so importing the package (as the ``formsync`` CLI does on every start) loads
no HTTP, SQL or MCP library until a name that needs one is used."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

if TYPE_CHECKING:
    from .client.agent import AgentClient as AgentClient
    from .client.agent import AgentToolError as AgentToolError
    from .client.rpc import FormClient as FormClient
    from .config.settings import ServiceSettings as ServiceSettings
    from .config.settings import Settings as Settings
    from .config.settings import load_settings as load_settings
    from .errors import ApiError as ApiError
    from .errors import AuthRateLimited as AuthRateLimited
    from .errors import Conflict as Conflict
    from .errors import Forbidden as Forbidden
    from .errors import FormsyncError as FormsyncError
    from .errors import InternalError as InternalError
    from .errors import MethodNotFound as MethodNotFound
    from .errors import NotFound as NotFound
    from .errors import RateLimited as RateLimited
    from .errors import TransportError as TransportError
    from .errors import Unauthorized as Unauthorized
    from .errors import UnexpectedResult as UnexpectedResult
    from .errors import UpgradeRequired as UpgradeRequired
    from .errors import ValidationError as ValidationError
    from .receiver.app import Receiver as Receiver
    from .receiver.app import create_receiver_app as create_receiver_app
    from .receiver.app import run_receiver as run_receiver
    from .receiver.tls import TlsSettingError as TlsSettingError
    from .signing import CustomScheme as CustomScheme
    from .signing import SigningConfigError as SigningConfigError
    from .signing import Verification as Verification
    from .signing import sign_custom as sign_custom
    from .signing import sign_formstep as sign_formstep
    from .signing import sign_standard as sign_standard
    from .signing import verify as verify
    from .store import Store as Store

# Each public name and the module that defines it.
_SOURCES: dict[str, str] = {
    "AgentClient": "client.agent", "AgentToolError": "client.agent",
    "FormClient": "client.rpc",
    "ApiError": "errors", "AuthRateLimited": "errors", "Conflict": "errors", "Forbidden": "errors",
    "FormsyncError": "errors", "InternalError": "errors", "MethodNotFound": "errors", "NotFound": "errors",
    "RateLimited": "errors", "TransportError": "errors", "Unauthorized": "errors", "UnexpectedResult": "errors",
    "UpgradeRequired": "errors", "ValidationError": "errors",
    "Receiver": "receiver.app", "create_receiver_app": "receiver.app", "run_receiver": "receiver.app",
    "ServiceSettings": "config.settings", "Settings": "config.settings", "load_settings": "config.settings",
    "CustomScheme": "signing", "SigningConfigError": "signing", "Verification": "signing",
    "sign_custom": "signing", "sign_formstep": "signing", "sign_standard": "signing", "verify": "signing",
    "Store": "store",
    "TlsSettingError": "receiver.tls",
}

__all__ = [
    "AgentClient", "AgentToolError", "ApiError", "AuthRateLimited", "Conflict", "CustomScheme", "Forbidden",
    "FormClient", "FormsyncError", "InternalError", "MethodNotFound", "NotFound", "RateLimited", "Receiver",
    "ServiceSettings", "Settings", "SigningConfigError", "Store", "TlsSettingError", "TransportError", "Unauthorized", "UnexpectedResult",
    "UpgradeRequired", "ValidationError", "Verification", "create_receiver_app", "load_settings", "run_receiver",
    "sign_custom", "sign_formstep", "sign_standard", "verify",
]


__getattr__, __dir__ = lazy_exports(__name__, _SOURCES, globals())

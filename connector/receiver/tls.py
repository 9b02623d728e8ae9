"""TLS for the receiver: the server context made from the certificate and key files the
settings name (``receiver.tls_cert``, ``receiver.tls_key``), each problem said in one
line naming the setting and the file."""

from __future__ import annotations

import ssl
from pathlib import Path

from ..errors import FormsyncError

__all__ = ["TlsSettingError", "server_context"]


class TlsSettingError(FormsyncError):
    """A certificate or key the settings name cannot serve TLS: ``setting`` is the
    setting to fix (``receiver.tls_cert`` or ``receiver.tls_key``)."""

    def __init__(self, setting: str, message: str) -> None:
        self.setting = setting
        super().__init__(f"{setting}: {message}")


def server_context(cert: Path | None, key: Path | None) -> ssl.SSLContext | None:
    """The TLS server context of ``cert`` (PEM, the chain after the certificate) and
    ``key`` (PEM, unencrypted); None when neither is set (plain HTTP). A missing,
    unreadable or non-PEM file, a key that is not the certificate's, or only one of the
    two set raises ``TlsSettingError``."""
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        given, missing = ("receiver.tls_key", "receiver.tls_cert") if cert is None else (
            "receiver.tls_cert", "receiver.tls_key")
        raise TlsSettingError(missing, f"not set, but {given} is; set both to serve https, or neither")
    _readable("receiver.tls_cert", cert, "CERTIFICATE")
    _readable("receiver.tls_key", key, "PRIVATE KEY")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key, password=lambda: _encrypted(key))
    except ssl.SSLError as e:
        if "KEY_VALUES_MISMATCH" in str(e) or "key values mismatch" in str(e):
            raise TlsSettingError("receiver.tls_key", f"{key} is not the key of the certificate {cert}; "
                                  "give the key the certificate was made with") from None
        raise TlsSettingError("receiver.tls_cert", f"{cert} with key {key} cannot serve TLS ({e.reason or e}); "
                              "give a PEM certificate and its unencrypted PEM key") from None
    return context


def _readable(setting: str, path: Path, kind: str) -> None:
    """``path`` exists, is readable and holds a PEM block of ``kind`` (any key type)."""
    try:
        text = Path(path).read_bytes()
    except FileNotFoundError:
        raise TlsSettingError(setting, f"{path} does not exist; give the path of the PEM file") from None
    except IsADirectoryError:
        raise TlsSettingError(setting, f"{path} is a directory; give the path of the PEM file") from None
    except PermissionError:
        raise TlsSettingError(setting, f"{path} cannot be read (permission denied); let the user running "
                              "formsync read it") from None
    if f"-----BEGIN {kind}".encode() not in text and not (kind == "PRIVATE KEY" and b" PRIVATE KEY-----" in text):
        what = "certificate" if kind == "CERTIFICATE" else "private key"
        raise TlsSettingError(setting, f"{path} holds no PEM {what} (-----BEGIN {kind}-----)")


def _encrypted(key: Path) -> str:
    # Called for an encrypted key only: OpenSSL would otherwise ask on the terminal.
    raise TlsSettingError("receiver.tls_key", f"{key} is encrypted; give the key unencrypted "
                          "(openssl pkey -in KEY -out KEY.plain), readable only by formsync's user")

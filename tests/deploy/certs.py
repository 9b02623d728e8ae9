"""A self-signed certificate for 127.0.0.1 and localhost, made by the test (cryptography)."""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class Cert:
    cert: Path
    key: Path

    def client_context(self) -> ssl.SSLContext:
        """A client context that trusts this certificate only (hostname checked)."""
        return ssl.create_default_context(cafile=str(self.cert))


def _key_pem(key: ec.EllipticCurvePrivateKey, password: bytes | None = None) -> bytes:
    crypt = serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, crypt)


def make_cert(directory: Path, name: str = "receiver") -> Cert:
    """``name.crt`` and ``name.key`` in ``directory``: valid for an hour, for 127.0.0.1."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                        x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    out = Cert(directory / f"{name}.crt", directory / f"{name}.key")
    out.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    out.key.write_bytes(_key_pem(key))
    return out


def other_key(directory: Path, *, password: bytes | None = None) -> Path:
    """A key that belongs to no certificate here (encrypted with ``password`` if given)."""
    path = directory / ("encrypted.key" if password else "other.key")
    path.write_bytes(_key_pem(ec.generate_private_key(ec.SECP256R1()), password))
    return path

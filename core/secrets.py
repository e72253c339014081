"""Credentials kept to be used again, encrypted at rest with Fernet (AES-128-CBC and
HMAC-SHA256): connections' tokens for their providers, webhook endpoints' signing secrets.

The keys are PAPERLANE_CONNECTOR_KEYS, newest first: credentials are encrypted with the
first and read with any (MultiFernet), so a new key goes in front and the old one stays
behind it until `reencrypt_connector_credentials` has rewritten every stored token with
the new one. The entry `from-secret-key` stands for the key derived from SECRET_KEY,
which is the only key when none is set: a deployment works without one more secret, and
its stored credentials stay readable when it starts naming keys of its own.
"""

import base64
import hashlib
import json
from dataclasses import dataclass

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

# In PAPERLANE_CONNECTOR_KEYS: the key derived from SECRET_KEY.
DERIVED_KEY = "from-secret-key"


class CredentialsUnreadable(Exception):
    """Stored credentials cannot be decrypted (the key changed): the connection must reconnect."""


def _derived_key() -> str:
    digest = hashlib.sha256(b"paperlane-connector-key:" + settings.SECRET_KEY.encode()).digest()
    return base64.urlsafe_b64encode(digest).decode()


def connector_keys() -> list[str]:
    """The configured keys, newest first, with `from-secret-key` resolved."""
    named = [k.strip() for k in settings.PAPERLANE_CONNECTOR_KEYS if k.strip()] or [DERIVED_KEY]
    return [_derived_key() if key == DERIVED_KEY else key for key in named]


def _fernets() -> list[Fernet]:
    fernets = []
    for number, key in enumerate(connector_keys(), start=1):
        try:
            fernets.append(Fernet(key))
        except ValueError as exc:
            raise ImproperlyConfigured(
                f"PAPERLANE_CONNECTOR_KEYS: key {number} must be 32 url-safe base64-encoded bytes "
                "(python -c 'from cryptography.fernet import Fernet; "
                "print(Fernet.generate_key().decode())') or from-secret-key."
            ) from exc
    return fernets


def credentials_encrypt(data: dict) -> str:
    """The Fernet token of `data` as JSON, under the newest key; empty data is ""."""
    if not data:
        return ""
    return MultiFernet(_fernets()).encrypt(json.dumps(data, sort_keys=True).encode()).decode()


def credentials_decrypt(token: str) -> dict:
    """The credentials of a stored token, read with whichever configured key made it."""
    if not token:
        return {}
    try:
        return json.loads(MultiFernet(_fernets()).decrypt(token.encode()))
    except InvalidToken as exc:
        raise CredentialsUnreadable(
            "The stored credentials cannot be read with the current keys."
        ) from exc


def credentials_under_newest_key(token: str) -> bool:
    """Whether a stored token was made with the newest key (nothing to re-encrypt)."""
    if not token:
        return True
    try:
        _fernets()[0].decrypt(token.encode())
    except InvalidToken:
        return False
    return True


def credentials_reencrypt(token: str) -> str:
    """The same credentials under the newest key (CredentialsUnreadable if no key reads
    them). Fernet's timestamp is kept."""
    if not token:
        return ""
    try:
        return MultiFernet(_fernets()).rotate(token.encode()).decode()
    except InvalidToken as exc:
        raise CredentialsUnreadable(
            "The stored credentials cannot be read with the current keys."
        ) from exc


@dataclass(frozen=True)
class ReencryptReport:
    """What a re-encryption did: how many stored tokens it rewrote under the newest key,
    how many already were, and the ids of those no configured key reads."""

    reencrypted: int
    current: int
    unreadable: list

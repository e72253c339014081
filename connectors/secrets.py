"""Connections' credentials, encrypted at rest with Fernet (AES-128-CBC and HMAC-SHA256).

The key is PAPERLANE_CONNECTOR_KEY; unset, it is derived from SECRET_KEY, so a
deployment works without one more secret, and rotating SECRET_KEY then means
reconnecting every connection whose credentials were stored.
"""

import base64
import hashlib
import json

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


class CredentialsUnreadable(Exception):
    """Stored credentials cannot be decrypted (the key changed): the connection must reconnect."""


def _fernet() -> Fernet:
    key = settings.PAPERLANE_CONNECTOR_KEY
    if not key:
        digest = hashlib.sha256(b"paperlane-connector-key:" + settings.SECRET_KEY.encode()).digest()
        key = base64.urlsafe_b64encode(digest).decode()
    try:
        return Fernet(key)
    except ValueError as exc:
        raise ImproperlyConfigured(
            "PAPERLANE_CONNECTOR_KEY must be 32 url-safe base64-encoded bytes "
            "(python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key())')."
        ) from exc


def credentials_encrypt(data: dict) -> str:
    """The Fernet token of `data` as JSON; empty data is stored as ""."""
    if not data:
        return ""
    return _fernet().encrypt(json.dumps(data, sort_keys=True).encode()).decode()


def credentials_decrypt(token: str) -> dict:
    if not token:
        return {}
    try:
        return json.loads(_fernet().decrypt(token.encode()))
    except InvalidToken as exc:
        raise CredentialsUnreadable(
            "The stored credentials cannot be read with the current key."
        ) from exc

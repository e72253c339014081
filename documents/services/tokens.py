"""API tokens: created once, stored hashed, revocable."""

import hashlib
import secrets
from collections.abc import Iterable
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from documents.models import ApiToken, Organisation

TOKEN_PREFIX = "pl_"


def _hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def api_token_create(
    *, organisation: Organisation, name: str = "", created_by: AbstractBaseUser | None = None
) -> tuple[ApiToken, str]:
    """Create a token and return it with its secret, which is never shown again."""
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        organisation=organisation,
        name=name,
        prefix=raw[: len(TOKEN_PREFIX) + 6],
        token_hash=_hash(raw),
        created_by=created_by,
    )
    return token, raw


def api_token_authenticate(*, raw: str) -> ApiToken | None:
    """Return the active token for a bearer secret, noting when it was last used."""
    if not raw or not raw.startswith(TOKEN_PREFIX) or len(raw) > 200:
        return None
    token = (
        ApiToken.objects.select_related("organisation")
        .filter(token_hash=_hash(raw), revoked_at__isnull=True)
        .first()
    )
    if token is None:
        return None
    now = timezone.now()
    stale = now - timedelta(seconds=settings.PAPERLANE_TOKEN_TOUCH_SECONDS)
    if token.last_used_at is None or token.last_used_at < stale:
        # One write a minute per token at most, not one per request.
        ApiToken.objects.filter(id=token.id).update(last_used_at=now)
        token.last_used_at = now
    return token


@transaction.atomic
def api_tokens_revoke(*, tokens: Iterable[ApiToken]) -> list[ApiToken]:
    """Revoke every token among `tokens` that is still active and return those this call
    revoked. A revoked token stays revoked, with the time it was first revoked."""
    ids = [token.id for token in tokens]
    # Locked, so that of two operators revoking the same token only one reports it.
    revoked = list(
        ApiToken.objects.select_for_update()
        .filter(id__in=ids, revoked_at__isnull=True)
        .order_by("id")
    )
    now = timezone.now()
    ApiToken.objects.filter(id__in=[token.id for token in revoked]).update(revoked_at=now)
    for token in revoked:
        token.revoked_at = now
    return revoked


def api_token_revoke(*, token: ApiToken) -> ApiToken:
    """Revoke one token (again is a no-op) and return it as stored."""
    api_tokens_revoke(tokens=[token])
    token.refresh_from_db(fields=["revoked_at"])
    return token

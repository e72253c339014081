"""API tokens: created once, stored hashed, revocable.

A token an admin makes on the members' tokens page acts for them (`bound_to_maker`): with
the role it was made with, but never more than the role its maker has in the organisation
now (an admin made a member acts as a member at most, and as an admin again once made one
again), and not at all once its maker left the organisation (their tokens are revoked with
the membership) or their account was deleted. As a person who leaves keeps nothing of
what they could do, neither does what acts for them. A token operators make for the
organisation (the admin, `create_api_token`) is no member's and keeps its role until it
is revoked."""

import hashlib
import secrets
from collections.abc import Iterable
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from core.errors import Conflict, ServiceError
from core.selects import RowSelect
from documents.models import ApiToken, Membership, Organisation
from documents.roles import Ability, Role, ability_require, role_within

TOKEN_PREFIX = "pl_"
# A token's last_used_at is written only when it is older than this.
TOUCH_SECONDS = 60


def _hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def api_token_create(
    *,
    organisation: Organisation,
    name: str = "",
    created_by: AbstractBaseUser | None = None,
    role: str = Role.MEMBER,
    bound_to_maker: bool = False,
) -> tuple[ApiToken, str]:
    """Create a token and return it with its secret, which is never shown again.

    `role` is what the token may do (documents/roles.py). `created_by` is the person
    who asked (an operator, in the admin); `bound_to_maker`: the token acts for them,
    never with more than their role in the organisation now (see above). Tokens are
    made by people only: a
    token that could make tokens would outlive its own revocation once leaked. Refused
    with `Conflict` (`token_limit_reached`) when the organisation already holds
    PAPERLANE_MAX_ACTIVE_TOKENS active tokens."""
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        _check_active_limit(organisation=organisation)
        token = ApiToken.objects.create(
            organisation=organisation,
            name=name,
            prefix=raw[: len(TOKEN_PREFIX) + 6],
            token_hash=_hash(raw),
            created_by=created_by,
            role=Role(role),
            bound_to_maker=bound_to_maker,
        )
    return token, raw


def _check_active_limit(*, organisation: Organisation) -> None:
    limit = settings.PAPERLANE_MAX_ACTIVE_TOKENS
    if not limit:
        return
    # The organisation's row is the lock, so that concurrent creates count one after the
    # other; NO KEY, so that inserts referring to the organisation (uploads) never wait.
    Organisation.objects.select_for_update(no_key=True).filter(id=organisation.id).exists()
    active = ApiToken.objects.filter(organisation=organisation, revoked_at__isnull=True).count()
    if active >= limit:
        raise Conflict(
            f"The organisation has reached its limit of {limit} active API tokens; revoke "
            "one it no longer uses, then create the new one.",
            code="token_limit_reached",
            limit=limit,
        )


# Read on every API request: a statement written once (core/selects.py), not a queryset.
_ACTIVE_TOKEN = RowSelect(
    ApiToken, related=("organisation",), where="t.token_hash = %s AND t.revoked_at IS NULL"
)


def api_token_authenticate(*, raw: str) -> ApiToken | None:
    """Return the active token for a bearer secret, with its organisation, noting when it
    was last used. A token bound to its maker comes with the role it may act with now
    (its `role` lowered, in memory only), or not at all once its maker is no member."""
    if not raw or not raw.startswith(TOKEN_PREFIX) or len(raw) > 200:
        return None
    token = _ACTIVE_TOKEN.first([_hash(raw)])
    if token is None:
        return None
    if token.bound_to_maker:
        maker_role = (
            Membership.objects.filter(
                organisation_id=token.organisation_id, user_id=token.created_by_id
            )
            .values_list("role", flat=True)
            .first()
            if token.created_by_id is not None
            else None
        )
        if maker_role is None:
            return None
        token.role = role_within(token.role, maker_role)
    now = timezone.now()
    stale = now - timedelta(seconds=TOUCH_SECONDS)
    if token.last_used_at is None or token.last_used_at < stale:
        # One write a minute per token at most, not one per request.
        ApiToken.objects.filter(id=token.id).update(last_used_at=now)
        token.last_used_at = now
    return token


@transaction.atomic
def api_tokens_revoke(
    *,
    tokens: Iterable[ApiToken],
    revoked_by: AbstractBaseUser | None = None,
    revoked_by_token: ApiToken | None = None,
) -> list[ApiToken]:
    """Revoke every token among `tokens` that is still active and return those this call
    revoked. A revoked token stays revoked, with the time it was first revoked and who
    revoked it: `revoked_by` (a person, in the admin) or `revoked_by_token` (the API).
    A token may always revoke itself; revoking others takes an admin's token (Forbidden)."""
    tokens = list(tokens)
    if revoked_by_token is not None and any(t.id != revoked_by_token.id for t in tokens):
        ability_require(
            organisation_id=revoked_by_token.organisation_id,
            ability=Ability.TOKENS,
            api_token=revoked_by_token,
        )
    ids = [token.id for token in tokens]
    # Locked, so that of two operators revoking the same token only one reports it.
    revoked = list(
        ApiToken.objects.select_for_update()
        .filter(id__in=ids, revoked_at__isnull=True)
        .order_by("id")
    )
    now = timezone.now()
    ApiToken.objects.filter(id__in=[token.id for token in revoked]).update(
        revoked_at=now, revoked_by=revoked_by, revoked_by_token=revoked_by_token
    )
    for token in revoked:
        token.revoked_at = now
        token.revoked_by = revoked_by
        token.revoked_by_token = revoked_by_token
    return revoked


def api_token_revoke(
    *,
    token: ApiToken,
    revoked_by: AbstractBaseUser | None = None,
    revoked_by_token: ApiToken | None = None,
) -> ApiToken:
    """Revoke one token (again is a no-op) and return it as stored."""
    api_tokens_revoke(tokens=[token], revoked_by=revoked_by, revoked_by_token=revoked_by_token)
    token.refresh_from_db(fields=["revoked_at", "revoked_by", "revoked_by_token"])
    return token


TOKEN_NAME_MAX = ApiToken._meta.get_field("name").max_length


def api_token_create_by_member(
    *, organisation: Organisation, user: AbstractBaseUser, name: str, role: str
) -> tuple[ApiToken, str]:
    """A token made by a person on the members' tokens page, with its secret (shown once).

    Only an admin of the organisation may (Forbidden otherwise, before anything else is
    looked at); the name is required, at most TOKEN_NAME_MAX characters, and the role one
    of viewer, member or admin (a ServiceError, 400, otherwise). The limit of active tokens
    holds as in `api_token_create`."""
    ability_require(organisation_id=organisation.id, ability=Ability.TOKENS, user=user)
    name = name.strip()
    if not name:
        raise ServiceError("Give the token a name that says what uses it.")
    if len(name) > TOKEN_NAME_MAX:
        raise ServiceError(f"A token's name is at most {TOKEN_NAME_MAX} characters.")
    if role not in Role.values:
        raise ServiceError("Choose the token's role: viewer, member or admin.")
    return api_token_create(
        organisation=organisation, name=name, created_by=user, role=role, bound_to_maker=True
    )


def api_tokens_revoke_of_member(*, organisation: Organisation, user: AbstractBaseUser) -> int:
    """Revoke the tokens that act for `user` in `organisation` (they are leaving it);
    returns how many were active."""
    tokens = ApiToken.objects.filter(
        organisation=organisation, created_by_id=user.pk, bound_to_maker=True
    )
    return len(api_tokens_revoke(tokens=tokens))


def api_token_revoke_by_member(*, token: ApiToken, user: AbstractBaseUser) -> ApiToken:
    """Revoke one of the organisation's tokens from the members' tokens page; only an admin
    of its organisation may (Forbidden otherwise). Again is a no-op."""
    ability_require(organisation_id=token.organisation_id, ability=Ability.TOKENS, user=user)
    return api_token_revoke(token=token, revoked_by=user)

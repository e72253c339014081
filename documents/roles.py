"""Who may do what in an organisation: a viewer reads, a member also sends work, an admin
also removes and manages.

The services check these (`ability_require`), so the member pages, the API and the admin
agree. A person's role is their membership's in the organisation of the thing acted on; a
token's is the one it was made with, and for a token an admin made on the members' tokens
page no more than its maker's role now (documents/services/tokens.py). Operators, in the
admin, are governed by Django's permissions instead, and the system (workers, the
sweeper, connected folders) by none.
"""

import enum

from django.contrib.auth.models import AbstractBaseUser

from core.errors import Forbidden
from documents.models import ApiToken, Membership

Role = Membership.Role
_RANK = {Role.VIEWER: 0, Role.MEMBER: 1, Role.ADMIN: 2}


class Ability(enum.StrEnum):
    READ = "read"  # documents, runs, search, downloads, quota
    UPLOAD = "upload"
    RETRY = "retry"
    CANCEL = "cancel"
    DELETE = "delete"
    TOKENS = "tokens"
    CONNECTIONS = "connections"
    MEMBERS = "members"
    WEBHOOKS = "webhooks"


# The least role that may; and what the refusal calls the action.
_NEEDS: dict[Ability, tuple[str, str]] = {
    Ability.READ: (Role.VIEWER, "read the organisation's documents"),
    Ability.UPLOAD: (Role.MEMBER, "upload documents"),
    Ability.RETRY: (Role.MEMBER, "retry runs"),
    Ability.CANCEL: (Role.MEMBER, "cancel runs"),
    Ability.DELETE: (Role.ADMIN, "delete documents"),
    Ability.TOKENS: (Role.ADMIN, "manage API tokens"),
    Ability.CONNECTIONS: (Role.ADMIN, "connect, pause or disconnect folders"),
    Ability.MEMBERS: (Role.ADMIN, "add members"),
    Ability.WEBHOOKS: (Role.ADMIN, "manage webhooks"),
}


_WHO_MAY = {Role.VIEWER: "members", Role.MEMBER: "members and admins", Role.ADMIN: "admins"}


def role_allows(role: str | None, ability: Ability) -> bool:
    """Whether `role` (None: no role, not a member) may do `ability`."""
    if role not in _RANK:
        return False
    return _RANK[role] >= _RANK[_NEEDS[ability][0]]


def role_within(role: str, bound: str) -> str:
    """The lesser of `role` and `bound`: what a token of `role` made by someone who has
    `bound` now may do."""
    return role if _RANK[Role(role)] <= _RANK[Role(bound)] else bound


def abilities(role: str | None) -> dict[str, bool]:
    """{ability: allowed} for `role`: what a page offers."""
    return {ability.value: role_allows(role, ability) for ability in Ability}


def role_of(*, organisation_id: int, user: AbstractBaseUser) -> str | None:
    """The person's role in the organisation; None if they are not a member."""
    return (
        Membership.objects.filter(organisation_id=organisation_id, user=user)
        .values_list("role", flat=True)
        .first()
    )


def ability_require(
    *,
    organisation_id: int,
    ability: Ability,
    user: AbstractBaseUser | None = None,
    api_token: ApiToken | None = None,
) -> None:
    """Raise Forbidden unless the token (if given) or else the person may do `ability` in
    the organisation. With neither, the system acts: nothing to check."""
    if api_token is not None:
        role = api_token.role if api_token.organisation_id == organisation_id else None
    elif user is not None:
        role = role_of(organisation_id=organisation_id, user=user)
    else:
        return
    if not role_allows(role, ability):
        raise refusal(role, ability, token=api_token is not None)


def refusal(role: str | None, ability: Ability, *, token: bool = False) -> Forbidden:
    """The Forbidden that says what `role` may not do and who may."""
    needed, action = _NEEDS[ability]
    if role:
        has = f"This API token has the {role} role" if token else f"You have the {role} role"
    elif token:
        has = "This API token is not for this organisation"
    else:
        has = "You are not a member of this organisation"
    # `role` only for one who has a role here: an answer's role is always one of them.
    roles = {"role": role} if role else {}
    return Forbidden(
        f"{has}: only {_WHO_MAY[needed]} may {action}. Ask an admin of the organisation.",
        needed=needed,
        **roles,
    )

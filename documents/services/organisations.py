"""Organisations and their members."""

from collections.abc import Callable

from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, Group, Permission
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F

from core.errors import Conflict, NotFound, ServiceError
from documents.models import Membership, Organisation
from documents.roles import Ability, ability_require
from documents.services.tokens import api_tokens_revoke_of_member


def organisation_ensure(*, slug: str, page_limit: int, name: str = "") -> tuple[Organisation, bool]:
    """The organisation `slug`, and whether it was created now: with `page_limit` if it is
    new; an existing one is returned as it is (a limit changed since is kept)."""
    return Organisation.objects.get_or_create(
        slug=slug, defaults={"name": name or slug, "page_limit": page_limit}
    )


def organisation_create(*, slug: str, page_limit: int, name: str = "") -> Organisation:
    """Create an organisation, or update the page limit of an existing one."""
    organisation, created = organisation_ensure(slug=slug, page_limit=page_limit, name=name)
    if not created and organisation.page_limit != page_limit:
        organisation_set_limit(organisation=organisation, page_limit=page_limit)
        organisation.refresh_from_db()
    return organisation


def organisation_limit_error(*, organisation: Organisation, page_limit: int) -> Conflict | None:
    """Why `page_limit` cannot be set now (below the pages used and held), or None."""
    current = Organisation.objects.values("pages_used", "pages_reserved").get(id=organisation.id)
    taken = current["pages_used"] + current["pages_reserved"]
    if page_limit >= taken:
        return None
    return Conflict(f"The page limit cannot go below the {taken} pages already used or held.")


def organisation_set_limit(*, organisation: Organisation, page_limit: int) -> None:
    """Change the page limit; never below the pages already used and held."""
    updated = Organisation.objects.filter(
        id=organisation.id, pages_used__lte=page_limit - F("pages_reserved")
    ).update(page_limit=page_limit)
    if not updated:
        raise organisation_limit_error(organisation=organisation, page_limit=page_limit)


def organisation_get(*, slug: str) -> Organisation:
    try:
        return Organisation.objects.get(slug=slug)
    except Organisation.DoesNotExist:
        raise NotFound(f"No organisation with slug {slug!r}.") from None


OPERATORS_GROUP = "Operators"
# Apps whose records operators do not manage from the admin.
DJANGO_APPS = ("admin", "auth", "contenttypes", "sessions")


# Sign-in locks (django-axes) operators read and lift; its logs are not theirs to edit.
SIGNIN_LOCK_PERMISSIONS = ("view_accessattempt", "delete_accessattempt")


def operators_group() -> Group:
    """The group staff members join: every permission on Paperlane's own records (documents,
    runs, connections), RQ's pages and the pipeline's dashboard, and reading and lifting
    sign-in locks; none on Django's own (users, groups, sessions). The same set as the
    migrations give a group made before them (operations 0001)."""
    group, _ = Group.objects.get_or_create(name=OPERATORS_GROUP)
    group.permissions.set(
        Permission.objects.exclude(content_type__app_label__in=(*DJANGO_APPS, "axes"))
        | Permission.objects.filter(
            content_type__app_label="axes", codename__in=SIGNIN_LOCK_PERMISSIONS
        )
    )
    return group


@transaction.atomic
def member_add(
    *,
    organisation: Organisation,
    username: str,
    password: str | None = None,
    staff: bool = False,
    role: str | None = None,
) -> AbstractBaseUser:
    """Add a user to an organisation, creating the user if needed, with `role` (a
    newcomer without one is a member; an existing member's role changes only when one is
    given). A `password` is checked by AUTH_PASSWORD_VALIDATORS (ServiceError, and
    nothing changes, if they refuse it)."""
    User = get_user_model()
    user, created = User.objects.get_or_create(username=username)
    fields = []
    if password:
        _password_check(password, user)
        user.set_password(password)
        fields.append("password")
    elif created:
        user.set_unusable_password()
        fields.append("password")
    if staff and not user.is_staff:
        user.is_staff = True
        fields.append("is_staff")
    if fields:
        user.save(update_fields=fields)
    if staff:
        user.groups.add(operators_group())
    if role is None:
        Membership.objects.get_or_create(organisation=organisation, user=user)
    else:
        Membership.objects.update_or_create(
            organisation=organisation, user=user, defaults={"role": Membership.Role(role)}
        )
    return user


def member_create(
    *,
    organisation: Organisation,
    username: str,
    password: str,
    role: str,
    added_by: AbstractBaseUser,
) -> Membership:
    """Make a new person's account and their membership of `organisation` with `role`, in
    one transaction, for an admin of the organisation (the members page).

    Refused, with nothing made: anyone but an admin of `organisation` (Forbidden); a
    username that is not one (ServiceError) or that an account has already, in any case
    (Conflict: an existing account is never changed or added here); a role that is not
    one; a password AUTH_PASSWORD_VALIDATORS refuse (ServiceError, their reasons). Each
    refusal of an input names it (`extra["field"]`: username, password, role). Written to
    the organisation's history in the admin, as a membership an operator adds there is,
    and the account's."""
    ability_require(organisation_id=organisation.id, ability=Ability.MEMBERS, user=added_by)
    User = get_user_model()
    username = _new_username(User, username)
    if role not in Membership.Role.values:
        raise ServiceError("Choose the role: viewer, member or admin.", field="role")
    taken = Conflict(
        f"The username “{username}” is already taken: choose another one.", field="username"
    )
    if User.objects.filter(username__iexact=username).exists():
        raise taken
    _password_check(password, User(username=username))
    try:
        with transaction.atomic():
            user = User.objects.create_user(username=username, password=password)
            membership = Membership.objects.create(
                organisation=organisation, user=user, role=Membership.Role(role)
            )
            _log(added_by, user, ADDITION, [{"added": {}}])
            _log(
                added_by,
                organisation,
                CHANGE,
                [{"added": {"name": "membership", "object": str(membership)}}],
            )
    except IntegrityError:  # the same name, made by another request meanwhile
        raise taken from None
    return membership


def _password_check(password: str, user: AbstractBaseUser) -> None:
    """ServiceError naming the field and AUTH_PASSWORD_VALIDATORS' reasons if they refuse
    `password` for `user`."""
    try:
        validate_password(password, user)
    except ValidationError as exc:
        reasons = " ".join(exc.messages)
        raise ServiceError(f"The password is refused: {reasons}", field="password") from None


def _new_username(User, username: str) -> str:
    username = username.strip()
    field = User._meta.get_field(User.USERNAME_FIELD)
    if not username:
        raise ServiceError("Give the new member a username.", field="username")
    if len(username) > field.max_length:
        raise ServiceError(
            f"A username is at most {field.max_length} characters.", field="username"
        )
    try:
        field.run_validators(username)
    except ValidationError:
        raise ServiceError(
            "A username has letters, digits and @/./+/-/_ only (no spaces).", field="username"
        ) from None
    return username


def _log(actor: AbstractBaseUser, obj, flag: int, message: list) -> None:
    """One entry of the admin's history of `obj`, as the admin writes its own."""
    LogEntry.objects.log_actions(
        user_id=actor.pk, queryset=[obj], action_flag=flag, change_message=message
    )


# What other apps stop when a member leaves an organisation, run in the same transaction
# as the removal (connectors pause the connections the member made): each registered by
# its app's AppConfig.ready, as documents imports no app above it.
MemberRemoved = Callable[..., None]
_member_removed_hooks: list[MemberRemoved] = []


def member_removed_register(hook: MemberRemoved) -> None:
    """Call `hook(organisation=..., user=...)` whenever a member leaves an organisation,
    inside the removal's transaction (an error in it undoes the removal)."""
    if hook not in _member_removed_hooks:
        _member_removed_hooks.append(hook)


@transaction.atomic
def member_remove(*, organisation: Organisation, user: AbstractBaseUser) -> bool:
    """Take `user` out of `organisation`, and in the same transaction stop what they set
    up there in their own name: the API tokens they made as its admin are revoked, and
    the registered hooks run (their connections are paused). False, and nothing
    changes, if they were not a member."""
    membership = (
        Membership.objects.select_for_update()
        .filter(organisation=organisation, user_id=user.pk)
        .first()
    )
    if membership is None:
        return False
    membership.delete()
    api_tokens_revoke_of_member(organisation=organisation, user=user)
    for hook in _member_removed_hooks:
        hook(organisation=organisation, user=user)
    return True


def member_get(*, organisation: Organisation, username: str) -> AbstractBaseUser:
    """The member of `organisation` called `username` (NotFound if there is none)."""
    user = (
        get_user_model()
        .objects.filter(username=username, memberships__organisation=organisation)
        .first()
    )
    if user is None:
        raise NotFound(f"{username!r} is not a member of {organisation.slug}.")
    return user

"""An organisation's admin makes a new member's account (`member_create`): the user and the
membership in one transaction, the password held to AUTH_PASSWORD_VALIDATORS, an existing
username refused, only by an admin of that organisation, written to the organisation's
history in the admin as the admin's own membership changes are."""

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.contrib.auth import authenticate, get_user_model
from django.contrib.contenttypes.models import ContentType

from core.errors import Conflict, Forbidden, ServiceError
from documents.models import Membership, Organisation
from documents.services.organisations import member_add, member_create

pytestmark = pytest.mark.django_db

User = get_user_model()
GOOD = "a long enough passphrase"


@pytest.fixture
def ada(org):
    return member_add(organisation=org, username="ada", role="admin")


def test_it_makes_the_account_and_the_membership_with_the_role(org, ada):
    membership = member_create(
        organisation=org, username="bob", password=GOOD, role="viewer", added_by=ada
    )

    assert (membership.organisation, membership.user.username, membership.role) == (
        org,
        "bob",
        "viewer",
    )
    assert authenticate(username="bob", password=GOOD) == membership.user
    assert not membership.user.is_staff
    # In the organisation's history in the admin, as a membership added there is.
    [entry] = LogEntry.objects.filter(
        content_type=ContentType.objects.get_for_model(Organisation), object_id=str(org.pk)
    )
    assert (entry.user, entry.action_flag) == (ada, CHANGE)
    assert entry.get_change_message() == f"Added membership “bob in {org.slug}”."
    [account] = LogEntry.objects.filter(content_type=ContentType.objects.get_for_model(User))
    assert (account.user, account.action_flag, account.object_id) == (
        ada,
        ADDITION,
        str(membership.user.pk),
    )


def test_a_password_the_validators_refuse_makes_nothing(org, ada, settings):
    settings.AUTH_PASSWORD_VALIDATORS = [
        {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
        {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    ]

    for password in ("short", "bobby-the-builder"):
        with pytest.raises(ServiceError) as refused:
            member_create(
                organisation=org,
                username="bobby-the-builder",
                password=password,
                role="member",
                added_by=ada,
            )
        assert refused.value.extra == {"field": "password"}
    assert "at least 8 characters" in str(refused.value) or "too similar" in str(refused.value)
    assert not User.objects.filter(username="bobby-the-builder").exists()
    assert not LogEntry.objects.exists()


def test_an_existing_username_is_refused_whatever_its_case_and_keeps_its_password(
    org, other_org, ada
):
    theirs = member_add(organisation=other_org, username="Carol", password="carol's own one")

    for name in ("Carol", "carol", " carol "):
        with pytest.raises(Conflict) as refused:
            member_create(
                organisation=org, username=name, password=GOOD, role="member", added_by=ada
            )
        assert refused.value.extra == {"field": "username"}
        assert refused.value.message == (
            f"The username “{name.strip()}” is already taken: choose another one."
        )
    assert authenticate(username="Carol", password="carol's own one") == theirs
    assert not Membership.objects.filter(organisation=org, user=theirs).exists()


def test_only_an_admin_of_that_organisation_adds_members(org, other_org, ada):
    member = member_add(organisation=org, username="mo", role="member")
    viewer = member_add(organisation=org, username="vi", role="viewer")
    # An admin of another organisation, and a person of none.
    elsewhere = member_add(organisation=other_org, username="gus", role="admin")
    stranger = User.objects.create_user(username="stranger", password=GOOD)

    for who in (member, viewer, elsewhere, stranger):
        with pytest.raises(Forbidden):
            member_create(
                organisation=org, username="dan", password=GOOD, role="member", added_by=who
            )
    assert not User.objects.filter(username="dan").exists()
    # An admin adds to their own organisation only.
    with pytest.raises(Forbidden):
        member_create(
            organisation=other_org, username="dan", password=GOOD, role="admin", added_by=ada
        )
    assert (
        member_create(
            organisation=other_org, username="dan", password=GOOD, role="admin", added_by=elsewhere
        ).role
        == "admin"
    )


@pytest.mark.parametrize(
    ("username", "role", "says"),
    [
        ("", "member", "Give the new member a username"),
        ("has spaces", "member", "letters, digits and @/./+/-/_ only"),
        ("x" * 151, "member", "at most 150 characters"),
        ("eve", "owner", "Choose the role: viewer, member or admin"),
    ],
)
def test_a_username_or_role_that_cannot_be_is_refused(org, ada, username, role, says):
    with pytest.raises(ServiceError) as refused:
        member_create(organisation=org, username=username, password=GOOD, role=role, added_by=ada)

    assert says in refused.value.message
    assert refused.value.extra == {"field": "role" if role == "owner" else "username"}
    assert User.objects.count() == 1  # ada alone

"""Who may do what (documents/roles.py), the commands that give roles, and the upgrade
that gives tokens made before roles the rights they had."""

from importlib import import_module

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.management import call_command

from core.errors import Forbidden
from documents.models import ApiToken, Membership
from documents.roles import Ability, ability_require, refusal, role_allows
from documents.services.organisations import member_add
from documents.services.tokens import api_token_create

pytestmark = pytest.mark.django_db

# The table of the issue that asked for roles, written out: what each role may do.
EXPECTED = {
    "viewer": {"read"},
    "member": {"read", "upload", "retry", "cancel"},
    "admin": {
        "read",
        "upload",
        "retry",
        "cancel",
        "delete",
        "tokens",
        "connections",
        "members",
        "webhooks",
    },
}


@pytest.mark.parametrize("role", ["viewer", "member", "admin"])
def test_each_role_may_do_exactly_its_abilities(role):
    assert {a.value for a in Ability if role_allows(role, a)} == EXPECTED[role]


def test_no_role_may_do_anything():
    assert not any(role_allows(None, ability) for ability in Ability)
    assert not any(role_allows("owner", ability) for ability in Ability)


def test_a_persons_role_is_their_membership_in_that_organisation(org, other_org):
    member_add(organisation=org, username="vera", role="viewer")
    vera = member_add(organisation=other_org, username="vera", role="admin")

    with pytest.raises(Forbidden) as refused:
        ability_require(organisation_id=org.id, ability=Ability.UPLOAD, user=vera)
    ability_require(organisation_id=other_org.id, ability=Ability.DELETE, user=vera)

    assert refused.value.status_code == 403
    assert refused.value.as_dict() == {
        "detail": "You have the viewer role: only members and admins may upload documents. "
        "Ask an admin of the organisation.",
        "code": "forbidden",
        "role": "viewer",
        "needed": "member",
    }


def test_a_token_acts_with_its_own_role_and_only_in_its_organisation(org, other_org):
    token, _ = api_token_create(organisation=org, name="ci", role="admin")

    ability_require(organisation_id=org.id, ability=Ability.TOKENS, api_token=token)
    with pytest.raises(Forbidden, match="not for this organisation"):
        ability_require(organisation_id=other_org.id, ability=Ability.READ, api_token=token)


def test_a_person_who_is_not_a_member_may_do_nothing(org):
    stranger = get_user_model().objects.create_user(username="stranger")

    with pytest.raises(Forbidden, match="not a member"):
        ability_require(organisation_id=org.id, ability=Ability.READ, user=stranger)


def test_add_member_gives_and_changes_a_role(org, capsys):
    call_command("add_member", org.slug, "vera", "--role", "viewer")
    assert "vera is viewer of acme" in capsys.readouterr().out
    call_command("add_member", org.slug, "vera")  # again without a role: unchanged
    assert Membership.objects.get(user__username="vera").role == "viewer"

    call_command("add_member", org.slug, "vera", "--role", "admin")

    assert Membership.objects.get(user__username="vera").role == "admin"


def test_a_newcomer_without_a_role_is_a_member(org):
    member_add(organisation=org, username="nina")

    assert Membership.objects.get(user__username="nina").role == "member"


def test_create_api_token_makes_a_token_of_the_role_asked(org, capsys):
    call_command("create_api_token", org.slug, "--name", "reader", "--role", "viewer")
    call_command("create_api_token", org.slug, "--name", "default")

    roles = dict(ApiToken.objects.values_list("name", "role"))
    assert roles == {"reader": "viewer", "default": "member"}


def test_the_upgrade_makes_every_existing_token_an_admins(org, other_org):
    migration = import_module("documents.migrations.0014_roles")
    vera = member_add(organisation=org, username="vera", role="member")
    olga = get_user_model().objects.create_user(username="olga", is_staff=True)
    api_token_create(organisation=org, name="by vera", created_by=vera)
    api_token_create(organisation=org, name="by olga", created_by=olga)
    api_token_create(organisation=other_org, name="by command")

    migration.tokens_keep_their_rights(apps, None)

    # Each could do everything before roles: none loses a right with the upgrade.
    assert set(ApiToken.objects.values_list("role", flat=True)) == {"admin"}
    assert Membership.objects.get(user=vera).role == "member"


def test_a_refusal_names_a_role_only_for_one_who_has_one():
    member = refusal("viewer", Ability.UPLOAD, token=True).as_dict()
    stranger = refusal(None, Ability.UPLOAD).as_dict()

    assert (member["role"], member["needed"]) == ("viewer", "member")
    assert "role" not in stranger and stranger["needed"] == "member"

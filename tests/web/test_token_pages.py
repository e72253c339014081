"""The members' tokens page: an admin of the organisation makes a named token (its secret
shown once), sees each token's prefix, maker and times, and revokes one after being
asked; anyone else is neither offered nor allowed any of it."""

import io
import re

import pytest
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client

from core.errors import Forbidden
from documents.models import ApiToken
from documents.services.organisations import member_add
from documents.services.tokens import (
    api_token_create,
    api_token_create_by_member,
    api_token_revoke_by_member,
)
from tests.support.files import make_pdf
from tests.support.members import signed_in

pytestmark = pytest.mark.django_db


def test_an_admin_makes_a_token_whose_secret_is_shown_once_and_works(org):
    admin = signed_in(org, "ada", "admin")

    made = admin.post("/tokens/", {"name": "billing export", "role": "viewer"})
    shown = admin.get(made["Location"])

    # Post, redirect, get: a reload shows the page again, and makes no second token.
    assert made.status_code == 302 and made["Location"] == "/tokens/"
    assert shown.status_code == 200 and shown["Cache-Control"] == "no-store"
    page = shown.content.decode()
    secret = re.search(r'id="token-secret" value="(pl_[^"]+)"', page)[1]
    # Kept for that one view: the session holds it no more.
    assert secret not in str(Session.objects.get().get_decoded())
    token = ApiToken.objects.get(name="billing export")
    assert (token.role, token.created_by.username, secret[: len(token.prefix)]) == (
        "viewer",
        "ada",
        token.prefix,
    )
    assert 'data-copy="token-secret"' in page
    listing = admin.get("/tokens/").content.decode()
    assert secret not in listing and f"{token.prefix}…" in listing and "by ada" in listing
    assert '<td data-label="Last used">never</td>' in listing
    api = Client(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert api.get("/api/v1/quota").status_code == 200
    used = admin.get("/tokens/").content.decode()
    assert '<td data-label="Last used">never</td>' not in used


def test_a_token_is_revoked_after_asking_and_stops_working(org):
    admin = signed_in(org, "ada", "admin")
    token, secret = api_token_create(organisation=org, name="old job")

    asked = admin.get(f"/tokens/{token.id}/revoke/")
    assert asked.status_code == 200 and "Revoke the token “old job”?" in asked.content.decode()
    token.refresh_from_db()
    assert token.is_active

    done = admin.post(f"/tokens/{token.id}/revoke/", follow=True)

    assert "The token “old job” was revoked." in done.content.decode()
    token.refresh_from_db()
    assert token.revoked_by.username == "ada" and not token.is_active
    assert Client(HTTP_AUTHORIZATION=f"Bearer {secret}").get("/api/v1/quota").status_code == 401


@pytest.mark.parametrize("role", ["viewer", "member"])
def test_no_one_but_an_admin_is_offered_or_allowed_tokens(org, role):
    client = signed_in(org, "pat", role)
    token, _ = api_token_create(organisation=org, name="keep")

    assert "/tokens/" not in client.get("/").content.decode()
    for response in (
        client.get("/tokens/"),
        client.post("/tokens/", {"name": "mine", "role": "admin"}),
        client.get(f"/tokens/{token.id}/revoke/"),
        client.post(f"/tokens/{token.id}/revoke/"),
    ):
        assert response.status_code == 403
        assert "only admins may manage API tokens" in response.content.decode()
    token.refresh_from_db()
    assert token.is_active and ApiToken.objects.count() == 1


def test_the_services_refuse_a_non_admin_whatever_calls_them(org):
    signed_in(org, "pat", "member")
    pat = User.objects.get(username="pat")
    token, _ = api_token_create(organisation=org, name="keep")

    with pytest.raises(Forbidden):
        api_token_create_by_member(organisation=org, user=pat, name="x", role="admin")
    with pytest.raises(Forbidden):
        api_token_revoke_by_member(token=token, user=pat)


def test_a_token_needs_a_name_and_a_role_that_exists(org):
    admin = signed_in(org, "ada", "admin")

    unnamed = admin.post("/tokens/", {"name": "  ", "role": "member"})
    unknown = admin.post("/tokens/", {"name": "x", "role": "owner"})

    assert unnamed.status_code == 400 and unknown.status_code == 400
    assert not ApiToken.objects.exists()


def test_another_organisations_token_is_a_404(org, other_org):
    admin = signed_in(org, "ada", "admin")
    theirs, _ = api_token_create(organisation=other_org, name="theirs")

    assert admin.get(f"/tokens/{theirs.id}/revoke/").status_code == 404
    assert admin.post(f"/tokens/{theirs.id}/revoke/").status_code == 404
    theirs.refresh_from_db()
    assert theirs.is_active


def named_pdf() -> SimpleUploadedFile:
    return SimpleUploadedFile("a.pdf", make_pdf(1), content_type="application/pdf")


def made_on_the_page(
    admin: Client, role: str = "admin", name: str = "nightly"
) -> tuple[ApiToken, Client]:
    """A token an admin makes on the tokens page, and an API client that sends it."""
    shown = admin.get(admin.post("/tokens/", {"name": name, "role": role})["Location"])
    secret = re.search(r'id="token-secret" value="(pl_[^"]+)"', shown.content.decode())[1]
    return ApiToken.objects.get(name=name), Client(HTTP_AUTHORIZATION=f"Bearer {secret}")


def test_a_token_acts_with_no_more_than_the_role_its_maker_has_now(org):
    token, api = made_on_the_page(signed_in(org, "ada", "admin"))
    assert api.get("/api/v1/tokens").status_code == 200

    member_add(organisation=org, username="ada", role="member")  # an operator demotes her
    as_member = api.get("/api/v1/tokens")
    uploaded = api.post("/api/v1/documents", {"file": named_pdf()})
    member_add(organisation=org, username="ada", role="viewer")
    as_viewer = api.post("/api/v1/documents", {"file": named_pdf()})
    member_add(organisation=org, username="ada", role="admin")

    assert (as_member.status_code, as_member.json()["role"]) == (403, "member")
    assert uploaded.status_code == 202
    assert (as_viewer.status_code, as_viewer.json()["role"]) == (403, "viewer")
    assert api.get("/api/v1/tokens").status_code == 200  # her role again
    token.refresh_from_db()
    assert token.role == "admin" and token.is_active


def test_a_token_is_refused_once_its_maker_left_the_organisation_or_was_deleted(org):
    token, api = made_on_the_page(signed_in(org, "ada", "admin"))
    _, by_operator = api_token_create(organisation=org, name="integration", role="admin")
    _, gone_api = made_on_the_page(signed_in(org, "bo", "admin"), "viewer", "bo's")
    assert api.get("/api/v1/quota").status_code == 200

    call_command("remove_member", org.slug, "ada", stdout=io.StringIO())
    User.objects.filter(username="bo").delete()

    assert api.get("/api/v1/quota").status_code == 401
    assert gone_api.get("/api/v1/quota").status_code == 401
    token.refresh_from_db()
    assert token.revoked_at is not None  # said so on the tokens list
    member_add(organisation=org, username="ada", role="admin")
    assert api.get("/api/v1/quota").status_code == 401  # coming back revives nothing
    # A token operators made for the organisation is no one's: it works on.
    operator_api = Client(HTTP_AUTHORIZATION=f"Bearer {by_operator}")
    assert operator_api.get("/api/v1/tokens").status_code == 200

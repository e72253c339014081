"""The organisation's members page: every member reads who is in it; its admins add a new
member's account with a form (username, password held to the validators, role). Others
are refused with a 403 that says why; another organisation's id is a 404."""

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.test import Client

from documents.models import Membership
from documents.services.organisations import member_add
from tests.support.members import signed_in
from tests.support.pages import page_text

pytestmark = pytest.mark.django_db

User = get_user_model()
GOOD = "a long enough passphrase"


def _form(organisation, **fields) -> dict:
    return {"organisation": organisation.id, "password": GOOD, "role": "member", **fields}


def test_an_admin_adds_a_member_who_then_signs_in(org):
    admin = signed_in(org, "ada", "admin")

    shown = admin.get("/members/")
    added = admin.post("/members/", _form(org, username="bob", role="viewer"), follow=True)

    assert shown.status_code == 200
    assert 'name="username"' in shown.content.decode()
    assert f'name="organisation" value="{org.id}"' in shown.content.decode()
    assert added.redirect_chain == [("/members/", 302)]
    text = page_text(added)
    assert "bob can now sign in as a viewer of Acme" in text
    assert "bob Viewer" in text and "ada Admin" in text
    assert Membership.objects.get(user__username="bob").role == "viewer"
    assert Client().login(username="bob", password=GOOD)


def test_the_header_leads_every_member_to_the_page_and_only_admins_get_the_form(org):
    viewer, member = signed_in(org, "vi", "viewer"), signed_in(org, "mo", "member")

    for client in (viewer, member):
        page = client.get("/members/")
        assert page.status_code == 200
        assert 'href="/members/"' in client.get("/").content.decode()
        assert "vi Viewer" in page_text(page) and 'name="username"' not in page.content.decode()
        assert "Only admins of Acme add members" in page_text(page)

        refused = client.post("/members/", _form(org, username="sneaky"))

        assert refused.status_code == 403
        assert "only admins may add members" in page_text(refused)
    assert not User.objects.filter(username="sneaky").exists()


def test_another_organisations_id_is_refused(org, other_org):
    admin = signed_in(org, "ada", "admin")
    # Not a member of it: as unknown as one that does not exist.
    unknown = admin.post("/members/", _form(other_org, username="x1"))
    missing = admin.post("/members/", {**_form(org, username="x2"), "organisation": 987654})
    # A member of it, but not its admin.
    member_add(organisation=other_org, username="ada", role="viewer")
    not_admin = admin.post("/members/", _form(other_org, username="x3"))

    assert unknown.status_code == missing.status_code == 404
    assert not_admin.status_code == 403
    assert not User.objects.filter(username__in=["x1", "x2", "x3"]).exists()
    assert not Membership.objects.filter(organisation=other_org).exclude(user__username="ada")


def test_a_taken_username_or_a_weak_password_is_said_on_the_form_which_keeps_the_rest(
    org, other_org
):
    admin = signed_in(org, "ada", "admin")
    member_add(organisation=other_org, username="carol", password="carol's own one")

    taken = admin.post("/members/", _form(org, username="Carol", role="admin"))
    weak = admin.post("/members/", _form(org, username="dave", password="short"))

    assert taken.status_code == 409
    assert "The username “Carol” is already taken: choose another one." in page_text(taken)
    assert 'value="Carol"' in taken.content.decode()
    assert '<option value="admin" selected>' in taken.content.decode()
    assert weak.status_code == 400
    assert "This password is too short" in page_text(weak)
    # A password is never written back into the page.
    assert "short" not in weak.content.decode().split('name="password"', 1)[1].split(">", 1)[0]
    assert not User.objects.filter(username="dave").exists()
    assert authenticate(username="carol", password="carol's own one") is not None


def test_signed_out_the_page_sends_to_sign_in(org):
    response = Client().get("/members/")

    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")

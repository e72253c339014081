"""A member's account: the role is shown, the password can be changed, and a member of
several organisations switches between them from every page's header."""

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from documents.services.organisations import member_add
from tests.support.members import PASSWORD, signed_in
from tests.support.pages import page_text

pytestmark = pytest.mark.django_db


def test_a_member_changes_their_password(org):
    client = signed_in(org, "mo", "member")

    form = client.get("/accounts/password/")
    done = client.post(
        "/accounts/password/",
        {
            "old_password": PASSWORD,
            "new_password1": "a new one, long",
            "new_password2": "a new one, long",
        },
        follow=True,
    )

    assert form.status_code == 200 and 'name="old_password"' in form.content.decode()
    assert "Password changed" in done.content.decode()
    assert Client().login(username="mo", password="a new one, long")
    assert not Client().login(username="mo", password=PASSWORD)


def test_a_wrong_old_password_changes_nothing(org):
    client = signed_in(org, "mo", "member")

    refused = client.post(
        "/accounts/password/",
        {
            "old_password": "wrong",
            "new_password1": "a new one, long",
            "new_password2": "a new one, long",
        },
    )

    assert refused.status_code == 200 and 'role="alert"' in refused.content.decode()
    assert Client().login(username="mo", password=PASSWORD)


def change(client: Client, old: str, new: str, url: str = "/accounts/password/"):
    return client.post(url, {"old_password": old, "new_password1": new, "new_password2": new})


@pytest.mark.parametrize("weak", ["password", "12345678", "qwertyuiop", "short1"])
def test_a_weak_new_password_is_refused_and_changes_nothing(org, weak):
    client = signed_in(org, "mo", "member")

    refused = change(client, PASSWORD, weak)

    assert refused.status_code == 200 and 'role="alert"' in refused.content.decode()
    assert Client().login(username="mo", password=PASSWORD)


@pytest.mark.parametrize("url", ["/accounts/password/", "/admin/password_change/"])
def test_wrong_old_passwords_are_limited_as_sign_ins_are_the_right_one_too(org, settings, url):
    client = signed_in(org, "mo", "member")
    if url.startswith("/admin/"):
        member_add(organisation=org, username="mo", staff=True)
    other = signed_in(org, "jo", "member")
    limit = settings.PAPERLANE_SIGNIN_FAILURE_LIMIT
    # The right old password with a weak new one is no guess: it does not count.
    assert change(client, PASSWORD, "password", url).status_code == 200

    answers = [change(client, f"guess-{n}", "a new one, long", url) for n in range(limit)]
    paused = change(client, PASSWORD, "a new one, long", url)

    assert [a.status_code for a in answers] == [200] * limit
    assert paused.status_code == 429
    assert 0 < int(paused["Retry-After"]) <= settings.PAPERLANE_SIGNIN_COOLOFF_SECONDS
    assert "Too many wrong passwords" in paused.content.decode()
    assert Client().login(username="mo", password=PASSWORD)
    # Someone else changes theirs as usual.
    assert change(other, PASSWORD, "another new one", url).status_code == 302


def test_every_member_page_shows_the_role_and_the_switcher_for_a_member_of_two(org, other_org):
    client = signed_in(org, "mo", "admin")
    member_add(organisation=other_org, username="mo", role="viewer")

    for url in ("/", "/search/", "/connections/", "/tokens/", "/accounts/password/"):
        page = client.get(url).content.decode()
        assert 'name="organisation"' in page, url
        assert "Your role: Admin mo " in _header(page), url

    client.post("/organisation/", {"organisation": "globex"})
    page = client.get("/").content.decode()
    assert "Your role: Viewer" in _header(page) and 'value="globex" selected' in page
    assert "/tokens/" not in page


def _header(page: str) -> str:
    """The words of the page's account bar, as a person (or a screen reader) reads them."""
    bar = re.search(r'<div class="account">(.*?)</div>', page, re.S)[1]
    bar = re.sub(r"<select.*?</select>", " ", bar, flags=re.S)
    return " ".join(page_text(type("R", (), {"content": bar.encode()})).split())


def test_the_header_names_the_role_and_the_operators_admin_once_each(org):
    client = signed_in(org, "olga", "admin")
    User.objects.filter(username="olga").update(is_staff=True)

    header = _header(client.get("/").content.decode())

    # The role once, said as a role; the link to the operators' admin by another name.
    assert header.count("Admin") == 1, header
    assert "Your role: Admin" in header
    assert re.search(r'<a href="/admin/"[^>]*>Operations</a>', client.get("/").content.decode())

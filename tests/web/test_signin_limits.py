"""Sign-in limits on both sign-in pages: a username that keeps failing from one address is
refused there, the right password too, until the cool-off ends or an operator lifts it;
other people, and the same person from elsewhere, sign in as usual."""

import io
import time
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.core.management import call_command
from django.test import Client

from documents.services.organisations import member_add
from tests.support.pages import page_text

pytestmark = pytest.mark.django_db

MEMBER_LOGIN = "/accounts/login/"
ADMIN_LOGIN = "/admin/login/"
PASSWORD = "the-right-password-1"


def sign_in(client: Client, url: str, username: str, password: str):
    return client.post(url, {"username": username, "password": password})


def signed_in(response, url: str) -> bool:
    return response.status_code == 302 and not response["Location"].startswith(url)


def fail_until_locked(client: Client, url: str, username: str, limit: int):
    for attempt in range(1, limit):
        response = sign_in(client, url, username, f"wrong-{attempt}")
        assert response.status_code == 200, attempt
        assert "didn" in page_text(response) or "correct" in page_text(response)
    return sign_in(client, url, username, "wrong-last")


@pytest.fixture
def people(org):
    member_add(organisation=org, username="alice", password=PASSWORD)
    member_add(organisation=org, username="bob", password=PASSWORD)
    member_add(organisation=org, username="olga", password=PASSWORD, staff=True)
    member_add(organisation=org, username="oscar", password=PASSWORD, staff=True)


@pytest.mark.parametrize(
    ("url", "username", "someone_else"),
    [(MEMBER_LOGIN, "alice", "bob"), (ADMIN_LOGIN, "olga", "oscar")],
)
def test_failures_lock_the_username_at_that_address_the_right_password_too(
    people, settings, url, username, someone_else
):
    attacker = Client(REMOTE_ADDR="203.0.113.9")

    locked = fail_until_locked(attacker, url, username, settings.AXES_FAILURE_LIMIT)

    assert locked.status_code == 429
    assert int(locked["Retry-After"]) == settings.PAPERLANE_SIGNIN_COOLOFF_SECONDS
    text = page_text(locked)
    assert f"Too many failed sign-ins as {username} from this address" in text
    assert "the right password is refused too" in text
    assert "csp" not in text.lower() and locked.has_header("Content-Security-Policy")
    again = sign_in(attacker, url, username, PASSWORD)
    assert again.status_code == 429 and "_auth_user_id" not in attacker.session
    # Someone else from elsewhere, and the same person from their own address, are not held.
    elsewhere = Client(REMOTE_ADDR="198.51.100.4")
    assert signed_in(sign_in(elsewhere, url, someone_else, PASSWORD), url)
    assert signed_in(sign_in(Client(REMOTE_ADDR="198.51.100.5"), url, username, PASSWORD), url)


def test_the_lock_ends_with_the_cool_off(people, settings):
    settings.AXES_COOLOFF_TIME = timedelta(seconds=2)
    client = Client(REMOTE_ADDR="203.0.113.10")
    locked = fail_until_locked(client, MEMBER_LOGIN, "alice", settings.AXES_FAILURE_LIMIT)
    assert locked.status_code == 429
    assert sign_in(client, MEMBER_LOGIN, "alice", PASSWORD).status_code == 429

    time.sleep(2.5)  # the cool-off must pass on the clock axes reads

    assert signed_in(sign_in(client, MEMBER_LOGIN, "alice", PASSWORD), MEMBER_LOGIN)
    # A successful sign-in starts the count again.
    assert not AccessAttempt.objects.filter(username="alice", failures_since_start__gt=0).exists()


def test_axes_reset_lifts_every_lock(people, settings):
    client = Client(REMOTE_ADDR="203.0.113.11")
    fail_until_locked(client, MEMBER_LOGIN, "alice", settings.AXES_FAILURE_LIMIT)

    call_command("axes_reset", stdout=io.StringIO())

    assert signed_in(sign_in(client, MEMBER_LOGIN, "alice", PASSWORD), MEMBER_LOGIN)


def test_an_operator_lifts_a_lock_in_the_admin(people, settings, operator):
    client = Client(REMOTE_ADDR="203.0.113.12")
    fail_until_locked(client, MEMBER_LOGIN, "alice", settings.AXES_FAILURE_LIMIT)
    attempt = AccessAttempt.objects.get(username="alice")

    listing = operator.get("/admin/axes/accessattempt/?locked_out=yes")
    assert listing.status_code == 200 and "alice" in page_text(listing)
    deleted = operator.post(f"/admin/axes/accessattempt/{attempt.id}/delete/", {"post": "yes"})

    assert deleted.status_code == 302
    assert signed_in(sign_in(client, MEMBER_LOGIN, "alice", PASSWORD), MEMBER_LOGIN)


def test_behind_the_proxies_each_client_is_counted_by_its_own_address(people, settings):
    """The documented set-up: one load balancer that appends the address it was reached from
    to X-Forwarded-For. Every request comes from the balancer's address; what a client writes
    into the header itself does not move it to another count."""
    settings.PAPERLANE_TRUSTED_PROXY_COUNT = 1
    balancer = "10.0.0.2"

    def attempt(password: str, forwarded: str):
        client = Client(REMOTE_ADDR=balancer, headers={"X-Forwarded-For": forwarded})
        return sign_in(client, MEMBER_LOGIN, "alice", password)

    # Each failure claims another origin left of the one the balancer wrote.
    answers = [
        attempt("wrong", f"192.0.2.{n}, 203.0.113.13") for n in range(settings.AXES_FAILURE_LIMIT)
    ]

    assert [a.status_code for a in answers] == [200] * (settings.AXES_FAILURE_LIMIT - 1) + [429]
    assert attempt(PASSWORD, "203.0.113.13").status_code == 429
    assert AccessAttempt.objects.get(username="alice").ip_address == "203.0.113.13"
    # Alice herself, at her own address behind the same balancer, signs in.
    assert signed_in(attempt(PASSWORD, "198.51.100.20"), MEMBER_LOGIN)

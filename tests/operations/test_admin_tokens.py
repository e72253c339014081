"""API tokens in the admin: made and revoked only through the token services, the secret
shown once, the record read-only and kept, every step in the admin log, staff only."""

import hashlib
import re
import secrets
from datetime import UTC, datetime

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.contrib.auth import get_user_model
from django.test import Client

from documents.models import ApiToken
from documents.services.tokens import api_token_create, api_token_revoke
from tests.support.pages import page_text

pytestmark = pytest.mark.django_db

TOKENS = "/admin/documents/apitoken/"
ADD = f"{TOKENS}add/"
SECRET = re.compile(r"pl_[A-Za-z0-9_-]{43}")


def _create(
    client: Client, org, *, name: str = "billing sync", once: str | None = None, role="member"
):
    form = {
        "organisation": org.id,
        "name": name,
        "role": role,
        "once": once or secrets.token_urlsafe(16),
    }
    return client.post(ADD, form)


def _secret(response) -> str:
    found = SECRET.findall(response.content.decode())
    assert len(set(found)) == 1, "the page shows exactly one secret"
    return found[0]


def _api_status(secret: str) -> int:
    return Client(HTTP_AUTHORIZATION=f"Bearer {secret}").get("/api/v1/quota").status_code


def _logged(token: ApiToken, flag: int) -> LogEntry | None:
    return LogEntry.objects.filter(
        content_type__model="apitoken", object_id=str(token.id), action_flag=flag
    ).first()


def _confirm(client: Client, page, url: str):
    """Press the confirmation page's button: post the hidden fields its form carries."""
    form = re.search(r'<form method="post">(.*?)</form>', page.content.decode(), re.S).group(1)
    data: dict[str, list[str]] = {}
    for name, value in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form):
        data.setdefault(name, []).append(value)
    return client.post(url, data)


def _revoke_action(client: Client, *tokens: ApiToken, confirmed: bool = False):
    form = {"action": "revoke_selected", "_selected_action": [t.id for t in tokens]}
    if confirmed:
        form["post"] = "yes"
    else:
        form["index"] = "0"
    return client.post(TOKENS, form)


def test_creating_a_token_shows_its_secret_once_and_it_works_at_the_api(operator, org):
    form = operator.get(f"{ADD}?organisation={org.id}")
    assert form.status_code == 200
    assert f'<option value="{org.id}" selected>' in form.content.decode()
    once = re.search(r'name="once" value="([^"]+)"', form.content.decode()).group(1)

    created = _create(operator, org, once=once)

    assert created.status_code == 200
    assert "no-store" in created["Cache-Control"]
    secret = _secret(created)
    token = ApiToken.objects.get()
    assert (token.organisation, token.name, token.created_by.username) == (
        org,
        "billing sync",
        "olga",
    )
    assert secret.startswith(token.prefix)
    assert _api_status(secret) == 200
    assert _logged(token, ADDITION).user.username == "olga"
    # Nowhere else: not the token's page, not the list, not the admin log.
    for url in (
        f"{TOKENS}{token.id}/change/",
        TOKENS,
        f"/admin/documents/organisation/{org.id}/change/",
    ):
        assert secret not in operator.get(url).content.decode()
    assert not LogEntry.objects.filter(change_message__contains=secret[3:]).exists()


def test_the_stored_row_holds_only_the_hash_of_the_secret(operator, org):
    secret = _secret(_create(operator, org))

    stored = ApiToken.objects.values().get()

    assert stored["token_hash"] == hashlib.sha256(secret.encode()).hexdigest()
    assert not any(secret[len(stored["prefix"]) :] in str(value) for value in stored.values())


def test_posting_the_create_form_again_makes_no_token_and_shows_no_secret(operator, org):
    once = secrets.token_urlsafe(16)
    first = _secret(_create(operator, org, once=once))

    again = _create(operator, org, once=once)

    token = ApiToken.objects.get()
    assert again.status_code == 302 and again["Location"] == f"{TOKENS}{token.id}/change/"
    reloaded = operator.get(again["Location"])
    assert "shown once and cannot be shown again" in page_text(reloaded)
    assert not SECRET.search(reloaded.content.decode())
    assert first not in reloaded.content.decode()


def test_each_add_makes_a_new_working_token_never_an_empty_hash(operator, org):
    first = _secret(_create(operator, org, name="one"))
    second = _create(operator, org, name="two")

    assert second.status_code == 200
    other = _secret(second)
    tokens = list(ApiToken.objects.order_by("id"))
    assert len(tokens) == 2 and first != other
    assert all(len(t.token_hash) == 64 for t in tokens)
    assert tokens[0].token_hash != tokens[1].token_hash
    assert (_api_status(first), _api_status(other)) == (200, 200)


@pytest.mark.parametrize("missing", ["organisation", "name"])
def test_the_create_form_refuses_a_token_without_an_organisation_or_a_name(missing, operator, org):
    form = {"organisation": org.id, "name": "billing sync", "role": "member", "once": "x"}
    form[missing] = ""

    refused = operator.post(ADD, form)

    assert refused.status_code == 200
    assert "This field is required." in page_text(refused)
    assert not SECRET.search(refused.content.decode())
    assert not ApiToken.objects.exists()


def test_revoking_through_the_action_asks_first_then_the_api_refuses_the_token(operator, org):
    token, secret = api_token_create(organisation=org, name="billing sync")
    keep, kept_secret = api_token_create(organisation=org, name="keep")

    asked = _revoke_action(operator, token)

    assert asked.status_code == 200
    assert "Revoke these API tokens?" in page_text(asked)
    assert f"{token.prefix}… billing sync" in page_text(asked)
    assert keep.prefix not in asked.content.decode()
    assert _api_status(secret) == 200

    done = _confirm(operator, asked, TOKENS)

    assert done.status_code == 302
    assert _api_status(secret) == 401
    assert _api_status(kept_secret) == 200
    entry = _logged(token, CHANGE)
    assert entry.user.username == "olga" and entry.change_message == "Revoked."
    assert _logged(keep, CHANGE) is None


def test_the_revoke_button_asks_first_then_revokes_and_logs(operator, org):
    token, secret = api_token_create(organisation=org)
    page = operator.get(f"{TOKENS}{token.id}/change/")
    assert f'href="{TOKENS}{token.id}/revoke/"' in page.content.decode()

    asked = operator.get(f"{TOKENS}{token.id}/revoke/")
    assert "Revoke these API tokens?" in page_text(asked)
    assert _api_status(secret) == 200

    done = _confirm(operator, asked, f"{TOKENS}{token.id}/revoke/")

    assert done.status_code == 302 and done["Location"] == f"{TOKENS}{token.id}/change/"
    assert _api_status(secret) == 401
    assert _logged(token, CHANGE).user.username == "olga"
    assert f"{TOKENS}{token.id}/revoke/" not in operator.get(done["Location"]).content.decode()


def test_the_token_page_shows_who_revoked_it(operator, org):
    token, _ = api_token_create(organisation=org, name="billing sync")

    operator.post(f"{TOKENS}{token.id}/revoke/")

    assert ApiToken.objects.get(id=token.id).revoked_by.username == "olga"
    assert "Revoked by: olga" in page_text(operator.get(f"{TOKENS}{token.id}/change/"))


def test_the_token_page_shows_the_token_that_revoked_it_through_the_api(operator, org):
    caller, _ = api_token_create(organisation=org, name="caller", role="admin")
    made, _ = api_token_create(organisation=org, name="made")
    api_token_revoke(token=made, revoked_by_token=caller)

    page = page_text(operator.get(f"{TOKENS}{made.id}/change/"))

    assert f"Revoked by token: {caller}" in page


def test_the_create_form_says_so_when_the_organisation_has_its_most_active_tokens(
    operator, org, settings
):
    settings.PAPERLANE_MAX_ACTIVE_TOKENS = 1
    api_token_create(organisation=org, name="the one")

    refused = _create(operator, org, name="one more")

    assert refused.status_code == 200
    assert "reached its limit of 1 active API tokens" in page_text(refused)
    assert 'value="one more"' in refused.content.decode()
    assert not SECRET.search(refused.content.decode())
    assert ApiToken.objects.count() == 1
    assert _logged(ApiToken.objects.get(), ADDITION) is None


def test_revoking_again_keeps_the_first_time_and_logs_once(operator, org):
    token, _ = api_token_create(organisation=org)
    operator.post(f"{TOKENS}{token.id}/revoke/")
    first = ApiToken.objects.get(id=token.id).revoked_at

    operator.post(f"{TOKENS}{token.id}/revoke/")
    _revoke_action(operator, token, confirmed=True)

    assert ApiToken.objects.get(id=token.id).revoked_at == first
    assert LogEntry.objects.filter(object_id=str(token.id), action_flag=CHANGE).count() == 1


def test_a_revoked_token_cannot_be_unrevoked_moved_or_edited(operator, org, other_org):
    token, secret = api_token_create(organisation=org, name="old")
    api_token_revoke(token=token)
    before = ApiToken.objects.values().get(id=token.id)

    page = operator.get(f"{TOKENS}{token.id}/change/")
    tampered = operator.post(
        f"{TOKENS}{token.id}/change/",
        {
            "organisation": other_org.id,
            "name": "new",
            "prefix": "pl_XXXXXX",
            "token_hash": hashlib.sha256(b"pl_chosen").hexdigest(),
            "revoked_at_0": "",
            "revoked_at_1": "",
        },
    )

    assert ApiToken.objects.values().get(id=token.id) == before
    assert _api_status(secret) == 401
    assert tampered.status_code == 403
    assert page.status_code == 200
    for field in ("organisation", "name", "prefix", "token_hash", "revoked_at_0"):
        assert f'name="{field}"' not in page.content.decode()


def test_tokens_cannot_be_deleted_in_the_admin(operator, org):
    token, secret = api_token_create(organisation=org)

    deleted = operator.post(f"{TOKENS}{token.id}/delete/", {"post": "yes"})
    bulk = operator.post(
        TOKENS, {"action": "delete_selected", "_selected_action": [token.id], "post": "yes"}
    )

    assert deleted.status_code == 403
    # No such action here: the list comes back and nothing happens.
    assert bulk.status_code == 302
    assert ApiToken.objects.filter(id=token.id).exists()
    assert _api_status(secret) == 200


def test_times_on_the_token_pages_have_seconds_in_the_site_time_zone(site_formats, operator, org):
    token, _ = api_token_create(organisation=org, name="ci")
    ApiToken.objects.filter(id=token.id).update(
        created_at=datetime(2025, 3, 4, 10, 20, 30, tzinfo=UTC),
        last_used_at=datetime(2025, 3, 4, 10, 21, 45, tzinfo=UTC),
        revoked_at=datetime(2025, 3, 4, 18, 15, 15, tzinfo=UTC),
    )

    page = page_text(operator.get(f"{TOKENS}{token.id}/change/"))
    listing = page_text(operator.get(TOKENS))

    # Kathmandu is UTC+05:45; the revocation falls on the next local day.
    for text in (page, listing):
        assert "4 Mar 2025, 16:05:30" in text
        assert "4 Mar 2025, 16:06:45" in text
        assert "5 Mar 2025, 00:00:15" in text


@pytest.fixture
def staff_without_permissions(db) -> Client:
    get_user_model().objects.create_user(username="sam", password="staff-pass-1", is_staff=True)
    client = Client()
    assert client.login(username="sam", password="staff-pass-1")
    return client


def test_staff_without_token_permissions_can_neither_create_nor_revoke(
    staff_without_permissions, org
):
    token, secret = api_token_create(organisation=org)

    assert staff_without_permissions.get(ADD).status_code == 403
    assert _create(staff_without_permissions, org).status_code == 403
    assert staff_without_permissions.get(f"{TOKENS}{token.id}/revoke/").status_code == 403
    assert staff_without_permissions.post(f"{TOKENS}{token.id}/revoke/").status_code == 403
    assert _revoke_action(staff_without_permissions, token, confirmed=True).status_code == 403
    assert ApiToken.objects.count() == 1 and _api_status(secret) == 200


def test_a_member_who_is_not_staff_gets_the_login_page_on_every_token_url(member_client, org):
    token, secret = api_token_create(organisation=org, name="billing sync")
    requests = [
        ("get", TOKENS, {}),
        ("get", ADD, {}),
        ("post", ADD, {"organisation": org.id, "name": "mine", "once": "x"}),
        ("get", f"{TOKENS}{token.id}/change/", {}),
        ("post", f"{TOKENS}{token.id}/change/", {"organisation": org.id, "name": "x"}),
        ("get", f"{TOKENS}{token.id}/revoke/", {}),
        ("post", f"{TOKENS}{token.id}/revoke/", {}),
        ("get", f"{TOKENS}{token.id}/history/", {}),
        (
            "post",
            TOKENS,
            {"action": "revoke_selected", "_selected_action": [token.id], "post": "yes"},
        ),
    ]

    for method, url, data in requests:
        response = getattr(member_client, method)(url, data)
        assert response.status_code == 302, (method, url)
        assert response["Location"].startswith("/admin/login/"), (method, url)
        assert token.prefix not in response.content.decode()

    assert ApiToken.objects.count() == 1
    assert ApiToken.objects.get(id=token.id).name == "billing sync"
    assert _api_status(secret) == 200

"""Tokens: revoked once, keeping the first time and who; created within the active limit."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from core.errors import Conflict
from documents.models import ApiToken
from documents.services.organisations import organisation_create
from documents.services.tokens import api_token_create, api_token_revoke, api_tokens_revoke

pytestmark = pytest.mark.django_db


def test_revoking_reports_only_the_tokens_this_call_revoked(org):
    live, _ = api_token_create(organisation=org, name="live")
    gone, _ = api_token_create(organisation=org, name="gone")
    first = api_token_revoke(token=gone).revoked_at

    revoked = api_tokens_revoke(tokens=[live, gone])
    again = api_tokens_revoke(tokens=[live, gone])

    assert [token.id for token in revoked] == [live.id] and again == []
    assert revoked[0].revoked_at == ApiToken.objects.get(id=live.id).revoked_at
    assert ApiToken.objects.get(id=gone.id).revoked_at == first


def test_a_revoked_token_keeps_who_revoked_it_first(org):
    olga = get_user_model().objects.create_user(username="olga")
    caller, _ = api_token_create(organisation=org, name="caller", role="admin")
    by_token, _ = api_token_create(organisation=org, name="by token")
    by_person, _ = api_token_create(organisation=org, name="by person")

    api_token_revoke(token=by_token, revoked_by_token=caller)
    api_token_revoke(token=by_person, revoked_by=olga)
    # A second revocation, by someone else, changes nothing.
    api_tokens_revoke(tokens=[by_token, by_person], revoked_by=olga, revoked_by_token=caller)

    stored = {t.name: t for t in ApiToken.objects.all()}
    assert (stored["by token"].revoked_by_token, stored["by token"].revoked_by) == (caller, None)
    assert (stored["by person"].revoked_by, stored["by person"].revoked_by_token) == (olga, None)
    assert stored["caller"].revoked_at is None


def test_creating_past_the_active_token_limit_is_refused_and_revoked_ones_do_not_count(
    org, other_org, settings
):
    settings.PAPERLANE_MAX_ACTIVE_TOKENS = 2
    first, _ = api_token_create(organisation=org)
    api_token_create(organisation=org)

    with pytest.raises(Conflict) as refused:
        api_token_create(organisation=org)

    assert refused.value.code == "token_limit_reached" and refused.value.extra == {"limit": 2}
    assert ApiToken.objects.filter(organisation=org).count() == 2
    # Another organisation has its own limit; a revoked token frees a place.
    api_token_create(organisation=other_org)
    api_token_revoke(token=first)
    api_token_create(organisation=org)
    assert ApiToken.objects.filter(organisation=org, revoked_at=None).count() == 2


def test_a_limit_of_zero_turns_the_active_token_check_off(org, settings):
    settings.PAPERLANE_MAX_ACTIVE_TOKENS = 0

    for _ in range(3):
        api_token_create(organisation=org)

    assert ApiToken.objects.filter(organisation=org).count() == 3


@pytest.mark.django_db(transaction=True)
def test_concurrent_creates_never_pass_the_active_token_limit(settings):
    settings.PAPERLANE_MAX_ACTIVE_TOKENS = 3
    org = organisation_create(slug="racing", page_limit=10)
    barrier = threading.Barrier(12)

    def create(_):
        barrier.wait()
        try:
            api_token_create(organisation=org)
            return "created"
        except Conflict:
            return "refused"
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=12) as pool:
        results = list(pool.map(create, range(12)))

    assert sorted(results).count("created") == 3
    assert ApiToken.objects.filter(organisation=org, revoked_at=None).count() == 3
